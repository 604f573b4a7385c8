"""The Xe kinds' vendor baseline: the torch.xpu plan, the reason recorded where torch-xpu or the GPU is
missing (this machine), and the mapping of sycl-tla problems onto the shared PyTorch paths."""

from __future__ import annotations

import pytest

from kernelpilot.dsl_plugins.sycl.vendor_worker import generic_problem
from kernelpilot.tile_tuner import torch_baselines
from kernelpilot.tile_tuner.baseline import plan_for, run_plan
from kernelpilot.tile_tuner.kernels import get_tile_kernel
from kernelpilot.tile_tuner.vendor_timing import Rule

torch = pytest.importorskip("torch")

DIMS = {
    "gemm": {"M": 64, "N": 64, "K": 64},
    "grouped_gemm": {"shapes": [[64, 128, 64], [32, 128, 64]]},
    "moe_gemm": {"N": 128, "K": 64, "num_experts": 4, "total_tokens": 64},
    "fa_prefill": {
        "batch": 1,
        "num_heads_q": 4,
        "num_heads_kv": 2,
        "seq_qo": 64,
        "seq_kv": 64,
        "head_dim": 64,
    },
}


def _problem(kind: str, dtype: str = "bf16") -> dict:
    return get_tile_kernel(kind, "bmg").validate_problem(DIMS[kind], dtype, kind)


@pytest.mark.skipif(hasattr(torch, "xpu") and torch.xpu.is_available(), reason="checks the no-XPU reason")
def test_without_torch_xpu_the_baseline_says_why():
    plan = plan_for(get_tile_kernel("gemm", "bmg"), _problem("gemm"), "bmg", {"reps": 3})
    assert plan.name == "oneDNN (torch.matmul on torch.xpu)" and "--reps=3" in plan.argv
    status, reason, _, _ = run_plan(plan, timeout_s=120)
    assert status == "cannot_run" and f"torch {torch.__version__} sees no XPU device" in reason


def test_sycl_problems_map_onto_the_shared_torch_paths():
    rule = Rule(iters_rule="fixed", warmup=1, iters=2, reps=1)
    g = generic_problem("gemm", _problem("gemm"))
    assert g == {"M": 64, "N": 64, "K": 64, "layout": "rr", "dtype": "bf16"}
    assert "time_ms" in torch_baselines.gemm(g, "cpu", rule)["cpu:torch.matmul"]
    moe = _problem("moe_gemm")
    gm = generic_problem("moe_gemm", moe)
    assert gm["groups"] == [[t, 128, 64] for t in moe["tokens_per_expert"]] and gm["layout"] == "rc"
    gg = generic_problem("grouped_gemm", _problem("grouped_gemm"))
    assert gg["groups"] == [[64, 128, 64], [32, 128, 64]] and gg["layout"] == "rr"
    assert "time_ms" in torch_baselines.grouped(gg, "cpu", rule)["torch.mm loop"]
    fa = generic_problem("fa_prefill", _problem("fa_prefill"))
    assert fa["num_heads_kv"] == 2 and fa["head_dim"] == 64 and fa["dtype"] == "bf16"
    with pytest.raises(ValueError, match="the torch.xpu baseline covers"):
        generic_problem("gemm", _problem("gemm", "e4m3"))
