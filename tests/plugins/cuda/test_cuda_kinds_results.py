"""Recorded H200 results of the CUDA grouped/MoE/FMHA kinds: schema and internal consistency.

The program lines kept in the results file are real output of the H200 run; they must parse into the
tuner's ``ProgramResult`` and agree with the kernels' own FLOP formulas.
"""

from __future__ import annotations

import json

import pytest

from kernelpilot.dsl_plugins.cuda.fmha import FmhaKernel
from kernelpilot.dsl_plugins.cuda.grouped_gemm import groups_flops
from kernelpilot.tile_tuner.kernel_api import parse_result_line
from tests.support import REPO

RESULTS = REPO / "tests" / "data" / "records" / "cuda_kinds_h200.json"
H200_BF16_PEAK_TFLOPS = 989.0


@pytest.fixture(scope="module")
def doc():
    if not RESULTS.exists():
        pytest.skip("no recorded H200 results")
    return json.loads(RESULTS.read_text())


def test_recorded_program_lines_parse_and_match_the_flop_formulas(doc):
    lines = doc["sample_program_lines"]
    assert set(lines) == {"grouped_gemm", "moe_gemm", "fa_prefill", "fa_decode"}
    for kind, line in lines.items():
        r = parse_result_line(line)
        assert r.status == "ok" and r.kernel in ("grouped_gemm", "fa_prefill", "fa_decode")
        assert r.verification is not None and r.verification.passed
        assert all(c["passed"] for c in r.verification.checked)
        if kind in ("grouped_gemm", "moe_gemm"):
            flops = groups_flops(r.problem["groups"])
        else:
            p = r.problem
            flops = 4.0 * p["b"] * p["h"] * p["q"] * p["k"] * p["d"] * (0.5 if p["causal"] else 1.0)
        assert r.tflops == pytest.approx(flops / (r.time_ms.median * 1e-3) / 1e12, rel=2e-3)
        assert 0 < r.tflops < H200_BF16_PEAK_TFLOPS


def test_every_workload_has_tuned_default_and_pytorch_side_by_side(doc):
    assert doc["versions"]["device"] == "NVIDIA H200" and doc["complete"]
    for kind, workloads in doc["results"].items():
        assert len(workloads) >= 3, kind
        for name, w in workloads.items():
            tuned, default = w["tuned"], w["default"]
            assert tuned["time_ms"] and default["time_ms"] and w["pytorch"], (kind, name)
            assert tuned["time_ms"] <= default["time_ms"] + 1e-9
            best = next(c for c in w["configs"] if c["label"] == tuned["label"])
            assert best["status"] == "ok" and best["verification"]["passed"]
            assert tuned["tflops"] == pytest.approx(w["flops"] / (tuned["time_ms"] * 1e-3) / 1e12)
            assert tuned["tflops"] < H200_BF16_PEAK_TFLOPS
            torch_best = min(v["time_ms"] for v in w["pytorch"].values())
            assert w["tuned_ge_pytorch"] == (tuned["time_ms"] <= torch_best)


def test_attention_flops_in_results_use_the_kernel_formula(doc):
    for kind in ("fa_prefill", "fa_decode"):
        k = FmhaKernel(kind)
        for w in doc["results"][kind].values():
            assert w["flops"] == k.flops(w["problem"])
