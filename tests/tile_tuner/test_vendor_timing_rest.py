"""The vendor baselines start each candidate's timed calls from a rested device, as a program does.

Why it matters: a worker times several PyTorch paths one after the other (a torch.mm loop, then
torch._grouped_mm; the SDPA backends), and under the power cap a GPU that has just worked runs a large
GEMM 5-10 % slower than one that has idled, which is how every tuning program starts (its own process
start).  Without the pause the later candidates would lose by the order alone."""

from __future__ import annotations

import pytest

from kernelpilot.tile_tuner import vendor_timing as vt


@pytest.fixture
def trace(monkeypatch):
    """Record calls, captures and sleeps in order; no torch, no device."""
    events: list[str] = []
    monkeypatch.setattr(vt, "_sync", lambda device: None)
    monkeypatch.setattr(vt, "_events", lambda device: None)
    monkeypatch.setattr(vt, "_capture", lambda fns, iters, device: events.append(f"capture{iters}"))
    monkeypatch.setattr(vt.time, "sleep", lambda s: events.append(f"sleep{s}"))
    return events


def test_rest_then_a_fresh_warm_up_before_the_timed_calls(trace):
    rule = vt.Rule(iters_rule="fixed", warmup=3, iters=4, reps=2, rest_s=0.5)
    out = vt.time_calls([lambda: trace.append("call")], "cuda", rule)
    # warm-up, capture, then the pause, a second warm-up, and the timed calls
    assert trace == ["call"] * 3 + ["capture4", "sleep0.5"] + ["call"] * 3 + ["call"] * (2 * 4)
    assert out["iters"] == 4 and out["time_ms"]["repetitions"] == 2
    assert vt.Rule().describe()["rest_s"] == 0.5  # recorded with every vendor result's timing rule


def test_no_rest_on_the_cpu_or_when_switched_off(trace):
    rule = vt.Rule(iters_rule="fixed", warmup=2, iters=1, reps=1, rest_s=0.5)
    vt.time_calls([lambda: trace.append("call")], "cpu", rule)
    assert "sleep0.5" not in trace and trace.count("call") == 3
    trace.clear()
    vt.time_calls([lambda: trace.append("call")], "cuda", vt.Rule(iters_rule="fixed", warmup=2, iters=1,
                                                                  reps=1, rest_s=0.0))  # fmt: skip
    assert not [e for e in trace if e.startswith("sleep")] and trace.count("call") == 3


def test_target_ms_rule_warms_up_for_its_milliseconds_again_after_the_rest(trace, monkeypatch):
    clock = iter(float(i) * 1e-3 for i in range(10_000))  # 1 ms per perf_counter read
    monkeypatch.setattr(vt.time, "perf_counter", lambda: next(clock))
    rule = vt.Rule(iters_rule="target_ms", warmup_ms=5.0, target_ms=10.0, reps=1, rest_s=0.25)
    vt.time_calls([lambda: trace.append("call")], "cuda", rule)
    i = trace.index("sleep0.25")
    iters = int(trace[i - 1].removeprefix("capture"))
    warm_again = trace[i + 1 :].count("call") - iters * rule.reps
    assert warm_again >= 3  # the warm-up again (>= 3 calls and warmup_ms), then the timed calls
