"""Confirmation of the search's finalists, interleaved with the vendor baseline, on CPU.

The toy kernel's programs are real C++ built by the real builder (tests/support/tuner_doubles.py); a
planted "lucky" first run (TOY_LUCKY) stands for a noisy search-time measurement, every program run
appends its label to TOY_CALL_LOG, and the toy vendor library is a Python one-liner (TOY_VENDOR_MS).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernelpilot.tile_tuner.confirm import ConfirmOptions, Contender, confirm
from kernelpilot.tile_tuner.confirm_run import apply, confirm_state
from kernelpilot.tile_tuner.engine import TuneEngine
from kernelpilot.tile_tuner.report import confirmation_notes
from kernelpilot.tile_tuner.store import ResultsStore
from kernelpilot.tile_tuner.summary import summarize_state
from kernelpilot.tile_tuner.workload import TuneOptions, Workload
from tests.support import REPO, run_cli
from tests.support.tuner_doubles import ToyKernel, ToyKernelWithVendor, ToyModel

needs_cxx = pytest.mark.skipif(shutil.which("c++") is None, reason="needs a host C++ compiler")
# 6 configs: true times (ms at M=N=1000) 64x64_b 1.0, 64x64_a 1.25, 64x32_b 1.5, 64x32_a 1.75,
# 32x32_b 2.0, 32x32_a 2.25 (the library default)
SPACE = {"tile": [[64, 64], [64, 32], [32, 32]]}
REPLAY_STORE = REPO / "tests" / "data" / "replay" / "h200_gemm_bf16.sqlite"


def _tune(tmp: Path, kernel, monkeypatch, lucky: str | None = "64x64_a"):
    """Exhaustive search over SPACE; returns (engine, state, call log path)."""
    log = tmp / "calls.log"
    (tmp / "state").mkdir()
    monkeypatch.setenv("TOY_CALL_LOG", str(log))
    monkeypatch.setenv("TOY_STATE", str(tmp / "state"))
    if lucky:
        monkeypatch.setenv("TOY_LUCKY", lucky)
    opts = TuneOptions(out_dir=tmp / "out", store_path=tmp / "s.sqlite", cache_dir=tmp / "cache", jobs=2,
                       batch_size=8, run_timeout_s=20)  # fmt: skip
    engine = TuneEngine(ToyModel(), kernel, "toy", opts, ResultsStore(opts.store_path))
    wl = Workload(name="w", kernel="gemm", dtype="bf16", dims={"M": 1000, "N": 1000, "K": 8}, target="toy",
                  proposer="exhaustive", budget_configs=100, space_filter=SPACE)  # fmt: skip
    [state] = engine.run([wl])
    log.write_text("")  # from here on the log holds only confirmation runs
    return engine, state, log


def _confirm(engine, state, **kw):
    conf = confirm_state(engine, state, ConfirmOptions(**kw).validate())
    summary = apply(summarize_state(state, "toy", None, engine.kernel), conf, engine.kernel, state.problem)
    return conf, summary


@needs_cxx
def test_confirmed_winner_differs_from_lucky_search_best_and_rounds_interleave(tmp_path, monkeypatch):
    engine, state, log = _tune(tmp_path, ToyKernelWithVendor(), monkeypatch)
    monkeypatch.setenv("TOY_VENDOR_MS", "2.0")
    assert state.best().label == "64x64_a" and state.best().time_ms == pytest.approx(0.625)  # the lucky run
    conf, summary = _confirm(engine, state)
    # finalists: the 3 fastest of the search plus the library default
    labels = [r["label"] for r in conf["finalists"]]
    assert labels == ["64x64_a", "64x64_b", "64x32_b", "32x32_a"]
    assert [r["role"] for r in conf["finalists"]] == ["finalist"] * 3 + ["default"]
    lucky = conf["finalists"][0]
    assert lucky["search_ms"] == pytest.approx(0.625) and lucky["rounds_ms"] == pytest.approx([1.25] * 3)
    assert conf["winner"]["label"] == "64x64_b" and conf["winner_changed"]
    assert summary["best"]["label"] == "64x64_b" and summary["best"]["time_ms"] == pytest.approx(1.0)
    assert summary["best"]["confirmed"] and summary["search_best"]["label"] == "64x64_a"
    assert summary["speedup_vs_default"] == pytest.approx(2.25)  # both sides confirmed
    # interleaved: every round runs every contender once, the start rotating; the programs' own log
    # (what actually ran, in order) matches the recorded call order
    order = [*labels, "toyBLAS"]
    expected = [order[(r + i) % 5] for r in range(3) for i in range(5)]
    assert [c["label"] for c in conf["calls"]] == expected
    assert log.read_text().split() == [x if x != "toyBLAS" else "vendor" for x in expected]
    assert [c["round"] for c in conf["calls"]] == [r for r in range(3) for _ in range(5)]
    # the vendor side: same rounds, its backend and versions recorded, ratio from confirmed numbers
    v = conf["vendor"]
    assert v["backend"] == "toyBLAS" and v["versions"] == {"toyblas": "1.0"} and v["rounds_ms"] == [2.0] * 3
    assert summary["vs_vendor"] == pytest.approx(2.0) and "2.000x as fast as toyBLAS" in summary["verdict"]
    assert not conf["unstable"] and lucky["spread"] == 0.0
    notes = confirmation_notes({"workloads": [summary]})
    assert any("changed the winner" in n and "64x64_a" in n for n in notes)
    # `kernelpilot export` reads the confirmed time, the vendor time and the ratio from this document
    from kernelpilot.export.runs import _confirmed

    assert _confirmed(summary, summary["best"]) == pytest.approx((1.0, 2.0, 2.0))


@needs_cxx
def test_slower_than_vendor_is_said_in_plain_words(tmp_path, monkeypatch):
    engine, state, _ = _tune(tmp_path, ToyKernelWithVendor(), monkeypatch, lucky=None)
    monkeypatch.setenv("TOY_VENDOR_MS", "0.8")
    conf, summary = _confirm(engine, state, finalists=1, rounds=2)
    assert [r["label"] for r in conf["finalists"]] == ["64x64_b", "32x32_a"]
    assert summary["vs_vendor"] == pytest.approx(0.8)
    assert "SLOWER than the vendor library toyBLAS" in summary["verdict"]
    assert any(n.startswith("SLOWER THAN VENDOR: w:") for n in confirmation_notes({"workloads": [summary]}))


@needs_cxx
def test_missing_baseline_no_baseline_and_zero_finalists(tmp_path, monkeypatch):
    engine, state, log = _tune(tmp_path, ToyKernelWithVendor(), monkeypatch, lucky=None)
    # the library is not there: the run says why, and the finalists are still confirmed
    conf, summary = _confirm(engine, state, finalists=1, rounds=1)
    assert conf["vendor"] == {"name": "toyBLAS", "status": "not_run",
                              "reason": "toyBLAS is not installed (TOY_VENDOR_MS unset)"}  # fmt: skip
    assert summary["vs_vendor"] is None and "toyBLAS is not installed" in summary["verdict"]
    assert log.read_text().split() == ["64x64_b", "32x32_a"]
    # --no-baseline: the vendor never runs even where it is installed
    monkeypatch.setenv("TOY_VENDOR_MS", "2.0")
    log.write_text("")
    conf, _ = _confirm(engine, state, finalists=1, rounds=1, baseline=False)
    assert "vendor" not in log.read_text() and conf["vendor"]["reason"] == "--no-baseline"
    # --finalists 0: no config is re-run; the vendor alone runs its rounds and the winner is unconfirmed
    log.write_text("")
    conf, summary = _confirm(engine, state, finalists=0, rounds=2)
    assert log.read_text().split() == ["vendor", "vendor"]
    assert conf["status"] == "baseline_only" and conf["winner"] is None and not conf["finalists"]
    assert summary["best"]["confirmed"] is False and summary["best"]["label"] == "64x64_b"
    assert summary["vs_vendor"] == pytest.approx(2.0) and "search-time (unconfirmed)" in summary["verdict"]
    # both off: nothing runs at all
    log.write_text("")
    conf, _ = _confirm(engine, state, finalists=0, baseline=False)
    assert log.read_text() == "" and conf["status"] == "skipped" and conf["calls"] == []


@needs_cxx
def test_kernel_without_a_vendor_hook_gets_a_reason(tmp_path, monkeypatch):
    engine, state, _ = _tune(tmp_path, ToyKernel(), monkeypatch, lucky=None)
    conf, _ = _confirm(engine, state, finalists=1, rounds=1)
    assert conf["vendor"]["status"] == "not_run"
    assert conf["vendor"]["reason"] == "the toy backend supplies no vendor baseline for gemm on toy"


def _fixed(times: list, status: str = "ok"):
    it = iter(times)

    def run():
        t = next(it)
        if t is None:
            return "wrong_result", "planted", None, 0.1
        return status, "", {"time_ms": {"median": t, "min": t, "max": t, "repetitions": 1}}, 0.1

    return run


def test_spread_above_3_percent_is_unstable_and_a_failing_finalist_drops_out():
    a = Contender(label="a", role="finalist", run=_fixed([1.0, 1.05, 1.0]), search_ms=0.9)
    b = Contender(label="b", role="finalist", run=_fixed([1.02, 1.02, 1.021]), search_ms=0.95)
    c = Contender(label="c", role="finalist", run=_fixed([0.5, None]), search_ms=0.5)
    d = Contender(label="d", role="finalist", run=_fixed([0.0]), search_ms=0.4)  # a zero time is no result
    conf = confirm([a, b, c, d], None, None, ConfirmOptions(rounds=3, extra_rounds=0))
    rows = {r["label"]: r for r in conf["finalists"]}
    assert rows["a"]["unstable"] and rows["a"]["spread"] == pytest.approx(0.05)
    assert not rows["b"]["unstable"] and rows["b"]["confirmed_ms"] == pytest.approx(1.02)
    assert rows["c"]["status"] == "wrong_result" and rows["c"]["confirmed_ms"] is None
    assert rows["c"]["rounds_ms"] == [0.5, None]  # not run again after its failure
    assert rows["d"]["status"] == "invalid_timing" and rows["d"]["rounds_ms"] == [None]
    assert conf["winner"]["label"] == "a" and conf["unstable"] == ["a"]


def _vendor_plan():
    from kernelpilot.tile_tuner.baseline import VendorPlan

    return VendorPlan(name="toy vendor", argv=("toy-vendor",))


def test_an_unstable_leader_or_vendor_gets_extra_interleaved_rounds():
    """After 3 rounds the leader spreads 10 % (0.85-0.94): 3 more rounds run for every contender, the
    winner and its confirmed time come from all 6, and the document says why they ran."""
    a = Contender(label="a", role="finalist", run=_fixed([0.94, 0.85, 0.85, 0.93, 0.92, 0.94]), search_ms=0.8)
    b = Contender(label="b", role="finalist", run=_fixed([0.90] * 6), search_ms=0.9)
    conf = confirm([a, b], None, None, ConfirmOptions(rounds=3))
    rows = {r["label"]: r for r in conf["finalists"]}
    assert len(rows["a"]["rounds_ms"]) == 6 and len(rows["b"]["rounds_ms"]) == 6
    assert conf["rounds"] == 6 and conf["extra_rounds"] == {"run": 3, "because_unstable": ["a"]}
    # 3 rounds alone would have named a (median 0.85) the winner; all 6 name b
    assert conf["winner"]["label"] == "b" and rows["a"]["confirmed_ms"] == pytest.approx(0.925)
    assert [c["round"] for c in conf["calls"]] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert [c["label"] for c in conf["calls"]][6:8] == ["b", "a"]  # round 3 rotates on from round 2

    # a stable leader: no extra rounds, even with an unstable runner-up
    a = Contender(label="a", role="finalist", run=_fixed([1.0, 1.0, 1.0]))
    b = Contender(label="b", role="finalist", run=_fixed([1.1, 1.5, 1.2]))
    conf = confirm([a, b], None, None, ConfirmOptions(rounds=3))
    assert conf["rounds"] == 3 and conf["extra_rounds"] == {"run": 0, "because_unstable": []}

    # an unstable vendor alone also adds rounds (its ratio is part of the verdict); E=2 here
    a = Contender(label="a", role="finalist", run=_fixed([1.0] * 5))
    conf = confirm([a], _vendor_plan(), _fixed([2.0, 2.4, 2.0, 2.1, 2.1]),
                   ConfirmOptions(rounds=3, extra_rounds=2))  # fmt: skip
    assert conf["extra_rounds"] == {"run": 2, "because_unstable": ["toy vendor"]}
    assert conf["vendor"]["confirmed_ms"] == pytest.approx(2.1) and len(conf["vendor"]["rounds_ms"]) == 5

    # 0 switches it off
    a = Contender(label="a", role="finalist", run=_fixed([0.94, 0.85, 0.85]))
    conf = confirm([a], None, None, ConfirmOptions(rounds=3, extra_rounds=0))
    assert conf["rounds"] == 3 and conf["winner"]["unstable"]


@pytest.mark.parametrize(("flags", "needle"), [
    (["--confirm-extra-rounds", "-1"], "field --confirm-extra-rounds: must be an integer >= 0"),
    (["--finalists", "-1"], "field --finalists: must be an integer >= 0"),
    (["--confirm-rounds", "0"], "field --confirm-rounds: must be an integer >= 1"),
    (["--finalists", "three"], "--finalists: invalid int value"),
])  # fmt: skip
def test_bad_confirmation_flags_exit_2_and_write_nothing(tmp_path, flags, needle):
    out = tmp_path / "o"
    r = run_cli("tune", "--target", "sm90", "--kernel", "gemm", "--dims", "M=1024,N=1024,K=1024",
                "--replay", str(REPLAY_STORE), "--out", str(out), *flags)  # fmt: skip
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert not out.exists()


def test_replay_says_confirmation_is_not_possible_and_keeps_flags(tmp_path):
    out = tmp_path / "o"
    r = run_cli("tune", "--target", "sm90", "--kernel", "gemm", "--dims", "M=1024,N=1024,K=1024",
                "--replay", str(REPLAY_STORE), "--budget-configs", "4", "--out", str(out), "--no-plots",
                "--finalists", "0", "--no-baseline")  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads((out / "run.json").read_text())
    assert doc["confirm"]["finalists"] == 0 and doc["confirm"]["baseline"] is False
    [w] = doc["workloads"]
    assert w["confirmation"]["status"] == "not_possible" and "--replay" in w["confirmation"]["reason"]
    assert w["best"]["confirmed"] is False and w["best"]["time_ms"] == w["search_best"]["time_ms"]
    assert "confirmation not possible: not possible under --replay" in r.stdout
    assert w["vendor"]["reason"] == "not run under --replay (nothing is measured)"
    assert "vs vendor" in r.stdout and "search-time number, not confirmed" in r.stdout


@pytest.mark.gpu
@pytest.mark.slow
def test_confirmed_gemm_next_to_cublas_on_the_gpu(tmp_path):
    """On an sm90 GPU with CUTLASS headers: two configs built, confirmed in 2 rounds with cuBLAS."""
    out = tmp_path / "o"
    r = run_cli("tune", "--target", "sm90", "--kernel", "gemm", "--dims", "M=2048,N=2048,K=2048",
                "--budget-configs", "2", "--finalists", "1", "--confirm-rounds", "2", "--out", str(out),
                "--cache-dir", str(tmp_path / "cache"), "--store", str(tmp_path / "s.sqlite"), "--no-plots",
                timeout=1200)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    [w] = json.loads((out / "run.json").read_text())["workloads"]
    conf, vendor = w["confirmation"], w["vendor"]
    assert conf["status"] == "confirmed" and len(conf["calls"]) == 2 * (len(conf["finalists"]) + 1)
    assert w["best"]["confirmed"] and all(r["status"] == "ok" for r in conf["finalists"])
    assert vendor["backend"] == "cublas:torch.matmul" and vendor["candidates"]["cublas:torch.matmul"]["graph"]
    assert 0.3 < w["vs_vendor"] < 3.0 and "vs vendor" in r.stdout


def test_a_planner_that_fails_or_returns_nothing_gets_a_reason():
    from kernelpilot.tile_tuner.baseline import plan_for

    class Broken(ToyKernel):
        def vendor_baseline(self, problem, target, bench_args):
            raise RuntimeError("library probe crashed")

    class NoOp(ToyKernel):
        def vendor_baseline(self, problem, target, bench_args):
            return None

    problem = {"M": 1, "N": 1, "K": 1}
    assert plan_for(Broken(), problem, "toy", {}).reason == (
        "vendor baseline planner failed: RuntimeError: library probe crashed"
    )
    assert (
        plan_for(NoOp(), problem, "toy", {}).reason
        == "the toy backend supplies no vendor baseline for gemm on toy"
    )
