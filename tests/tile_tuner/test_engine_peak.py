"""The above-peak guard holds a measurement to the peak of the problem's own input types.

An Arc B580 does 233 int8 TOP/s but 116.5 bf16 TFLOP/s: an int8 GEMM at 150 TOP/s is a good result, not
a measurement error, while a bf16 GEMM at that rate is impossible.  Measurements are fed straight into
the engine's result path (the replay backend: nothing is built or run).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.dsl_plugins.sycl.kernels import all_kernels
from kernelpilot.hw_models.catalogue import get_device, peak_key
from kernelpilot.targets import get_target_model
from kernelpilot.tile_tuner.engine import TuneEngine
from kernelpilot.tile_tuner.summary import summarize_state
from kernelpilot.tile_tuner.workload import RoundItem, TuneOptions, Workload
from tests.support import REPO

STORE = REPO / "tests" / "data" / "replay" / "h200_gemm_bf16.sqlite"
GEMM = {k.kind: k for k in all_kernels()}["gemm"]
DIMS = {"M": 4096, "N": 4096, "K": 4096}


def _measure(tmp_path: Path, dtype, tops: float):
    opts = TuneOptions(
        out_dir=tmp_path, store_path=tmp_path / "s.sqlite", cache_dir=tmp_path / "c", replay=STORE
    )
    device = get_device("arc_b580")
    engine = TuneEngine(get_target_model("bmg"), GEMM, "bmg", opts, None, device=device)
    wl = Workload(
        name="w", kernel="gemm", dtype=dtype, dims=DIMS, target="bmg", proposer="model", budget_configs=1
    )
    state = engine.make_state(wl)
    time_ms = GEMM.flops(state.problem) / (tops * 1e12) * 1e3
    raw = {"status": "ok", "time_ms": {"median": time_ms, "min": time_ms, "max": time_ms},
           "verification": {"passed": True}}  # fmt: skip
    item = RoundItem(state=state, config=state.default_cfg, key=state.default_key, build=None)
    return engine._to_measurement(item, "ok", "", raw, 0.1, None), state, device


def test_int8_gemm_between_the_bf16_and_int8_peaks_is_a_result(tmp_path: Path) -> None:
    m, state, device = _measure(tmp_path, "s8", 150.0)
    assert m.status == "ok" and m.tflops == pytest.approx(150.0)
    # the run JSON reports against the same peak the guard used
    doc = summarize_state(state, "bmg", device, GEMM)
    assert doc["peak_tflops"] == 233.0


def test_int8_gemm_above_the_int8_peak_is_flagged(tmp_path: Path) -> None:
    m, _, _ = _measure(tmp_path, "s8", 250.0)
    assert m.status == "above_peak" and "233.0" in m.reason


def test_bf16_gemm_is_held_to_the_bf16_peak(tmp_path: Path) -> None:
    m, _, _ = _measure(tmp_path, "bf16", 150.0)
    assert m.status == "above_peak" and "116.5" in m.reason


def test_mixed_inputs_use_the_rate_of_the_operation_that_does_the_math() -> None:
    b580 = get_device("arc_b580")
    assert peak_key({"a": "bf16", "b": "s8"}) == "bf16"  # s8 weights upconverted to a bf16 DPAS
    assert peak_key({"a": "s8", "b": "s4"}) == "s8"  # integer DPAS
    assert peak_key({"a": "f16", "b": "e5m2"}) == "f16"
    assert b580.peak({"a": "bf16", "b": "s8"}) == 116.5
    assert b580.peak("s4") == 233.0  # no int4 entry: the integer unit's rate, not the bf16 one
    assert b580.peak("e4m3") == 116.5  # fp8 inputs run on the 16-bit DPAS
