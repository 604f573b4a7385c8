"""Xe-Forge tile-tuning files: ``max_rounds`` counts LLM rounds with the llm proposer, and ``output:``
is written in Xe-Forge's results schema."""

from __future__ import annotations

from pathlib import Path

from kernelpilot.tile_tuner.batch import load_batch
from kernelpilot.tile_tuner.report import xeforge_results

XF = "mode: gemm\ndtype: bf16\nmax_rounds: 3\noutput: res.json\ntune-xpu:\n  - name: g1\n    dims: {M: 1024, N: 1024, K: 1024}\n"


def test_max_rounds_are_llm_rounds_with_the_llm_proposer(tmp_path: Path) -> None:
    f = tmp_path / "xf.yaml"
    f.write_text(XF)
    _, [w], extras = load_batch(f, {"proposer": "llm"}, "bmg")
    assert (w.proposer, w.budget_configs, w.batch_size) == ("llm", 16, 5)  # default + 3 rounds of 5
    assert extras["output"] == "res.json" and extras["format"] == "xe-forge"
    _, [w], _ = load_batch(f, {}, "bmg")
    assert (w.proposer, w.budget_configs, w.batch_size) == ("model", 16, None)


def test_output_in_xeforge_results_schema() -> None:
    doc = {
        "workloads": [
            {
                "name": "g1",
                "dims": {"M": 1024, "N": 1024, "K": 1024, "layout": "rr"},
                "best": {"config": {"wg": [256, 256, 32], "sg": [8, 4, 1], "stages": 2}, "tflops": 90.5, "time_ms": 0.0237},
                "tried": [
                    {"config": {"wg": [256, 256, 32], "sg": [8, 4, 1], "stages": 2}, "status": "ok", "time_ms": 0.0237, "tflops": 90.5},
                    {"config": {"wg": [512, 256, 64], "sg": [8, 4, 1], "stages": 2}, "status": "build_failed", "time_ms": None, "tflops": None, "reason": "SLM exceeded"},
                ],
            }
        ]
    }  # fmt: skip
    out = xeforge_results(doc)
    (wl,) = out["workloads"]
    assert wl["problem_shape"] == {"M": 1024, "N": 1024, "K": 1024, "layout": "rr"} and wl["name"] == "g1"
    assert wl["best_config"] == {"wg": [256, 256, 32], "sg": [8, 4, 1], "extra": {"stages": 2}}
    assert (wl["best_tflops"], wl["best_time_ms"]) == (90.5, 0.0237)
    ok, failed = wl["configs_tested"]
    assert ok["passed"] is True and ok["error"] is None and ok["config"]["sg"] == [8, 4, 1]
    assert failed["passed"] is False and failed["error"] == "SLM exceeded"
    assert out["tile_shapes"] == [{"wg": [256, 256, 32], "sg": [8, 4, 1]}]
