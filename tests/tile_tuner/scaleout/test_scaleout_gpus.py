"""One host: --gpus parsing, pinning variables, and the GPU pool's one-benchmark-per-GPU guarantee."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from kernelpilot.errors import InputError, ToolMissingError
from kernelpilot.tile_tuner.scaleout.base import BusyClock, InProcessExecutor, MeasureRequest
from kernelpilot.tile_tuner.scaleout.gpu_pool import GpuPoolExecutor
from kernelpilot.tile_tuner.scaleout.gpus import parse_gpus, pin_env, resolve_gpus


def test_parse_gpus():
    assert parse_gpus("all") is None
    assert parse_gpus(" 0, 2,1 ") == [0, 2, 1]
    for bad in ("", "0,,1", "x", "-1", "0,0", "1.5"):
        with pytest.raises(InputError) as e:
            parse_gpus(bad)
        assert "--gpus" in str(e.value.field)


def test_resolve_respects_an_existing_allocation(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    assert resolve_gpus("all", "cuda") == ["5", "7"]
    assert resolve_gpus("1", "cuda") == ["7"]
    with pytest.raises(InputError) as e:
        resolve_gpus("0,2", "cuda")
    assert "allowed: 0..1" in str(e.value)


def test_resolve_without_gpus(monkeypatch, tmp_path):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    assert resolve_gpus("0,1", "cuda", replay=True) == ["0", "1"]  # replay: slots, nothing runs on them
    with pytest.raises(ToolMissingError, match="--gpus 0,1"):
        resolve_gpus("0,1", "cuda")
    with pytest.raises(ToolMissingError, match="no cuda GPU"):
        resolve_gpus("all", "cuda", replay=True)


def test_pin_env():
    assert pin_env("cuda", "3") == {"CUDA_VISIBLE_DEVICES": "3"}
    assert pin_env("sycl", "1") == {"ZE_AFFINITY_MASK": "1", "ONEAPI_DEVICE_SELECTOR": "level_zero:0"}


PROBE = (
    "import json, os, sys, time; t0 = time.time(); time.sleep(0.15); "
    "print(json.dumps({'gpu': os.environ.get('CUDA_VISIBLE_DEVICES'), 't0': t0, 't1': time.time()}))"
)


class ProcessBackend:
    """Stands in for LocalBackend.measure: runs a real child process with the pool's environment and
    reports what the child saw (which GPU it was pinned to, when it ran)."""

    name = "probe"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls = 0

    def measure(self, item, outcome, env=None):
        with self.lock:
            self.calls += 1
        out = subprocess.run(
            [sys.executable, "-c", PROBE], env={**env}, capture_output=True, text=True, check=True
        )
        return "ok", "", json.loads(out.stdout), 0.15


def test_gpu_pool_pins_each_benchmark_and_never_shares_a_gpu():
    pool = GpuPoolExecutor(["3", "5", "6"], "cuda")
    backend = ProcessBackend()
    reqs = [MeasureRequest(i, f"item{i}", None) for i in range(9)]
    try:
        got = list(pool.measure(backend, reqs, stop=lambda: False))
    finally:
        pool.close()
    assert sorted(r.index for r, _, _ in got) == list(range(9))  # each request exactly once
    assert backend.calls == 9
    runs = [res[2] for _, res, _ in got]
    assert {r["gpu"] for r in runs} <= {"3", "5", "6"}
    by_gpu: dict[str, list[tuple[float, float]]] = {}
    for r in runs:
        by_gpu.setdefault(r["gpu"], []).append((r["t0"], r["t1"]))
    for gpu, ivs in by_gpu.items():
        ivs.sort()
        for (_, a1), (b0, _) in zip(ivs, ivs[1:], strict=False):
            assert b0 >= a1, f"two benchmarks overlapped on GPU {gpu}"
    assert sum(pool.describe()["benchmarks_per_gpu"].values()) == 9


def test_pool_stops_starting_benchmarks_when_the_budget_is_spent():
    pool = GpuPoolExecutor(["0"], "cuda")
    backend = ProcessBackend()

    def stop() -> bool:  # the budget is spent after two benchmarks (checked before each start)
        return backend.calls >= 2

    try:
        got = [
            (req.index, res is not None)
            for req, res, _ in pool.measure(backend, [MeasureRequest(i, i, None) for i in range(5)], stop)
        ]
    finally:
        pool.close()
    assert len(got) == 5  # every request is answered: started ones with a result, the rest with None
    assert sum(started for _, started in got) == 2  # one GPU: strictly one after another


def test_in_process_executor_is_serial_and_in_order():
    class Backend:
        name = "x"

        def measure(self, item, outcome):
            return "ok", "", {"item": item}, 0.0

    ex = InProcessExecutor()
    got = [
        req.index
        for req, _, _ in ex.measure(Backend(), [MeasureRequest(i, i, None) for i in range(4)], lambda: False)
    ]
    ex.close()
    assert got == [0, 1, 2, 3]


def test_busy_clock_counts_overlap_once(monkeypatch):
    import itertools
    import types

    from kernelpilot.tile_tuner.scaleout import base

    # [0,3] and [1,4] overlap; [10,11] apart; then "now" for busy()
    ticks = itertools.chain([0.0, 1.0, 3.0, 4.0, 10.0, 11.0], itertools.repeat(20.0))
    monkeypatch.setattr(base, "time", types.SimpleNamespace(monotonic=lambda: next(ticks)))
    clock = BusyClock()
    a = clock.start("bench")
    b = clock.start("bench")
    clock.stop(a)
    clock.stop(b)
    c = clock.start("bench")
    clock.stop(c)
    assert clock.busy("bench") == pytest.approx(5.0)  # 0..4 once, plus 10..11
    assert clock.count("bench") == 3
    assert clock.busy("build") == 0.0


def test_vendor_comes_from_the_target_models():
    """The pinning variable and the probe are the target model's vendor's, not a table in the tuner."""
    from kernelpilot.targets import get_target_model
    from kernelpilot.tile_tuner.scaleout.gpus import gpu_vendor

    assert gpu_vendor("cuda") is get_target_model("sm90").vendor
    assert gpu_vendor("sycl") is get_target_model("bmg").vendor
    assert get_target_model("sm90").vendor.visible_devices_env == "CUDA_VISIBLE_DEVICES"
    with pytest.raises(InputError, match="known: cuda, sycl"):
        pin_env("rocm", "0")
