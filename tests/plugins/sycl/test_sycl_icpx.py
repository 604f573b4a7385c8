"""Compile (icpx) and run (Intel GPU) the rendered sycl-tla programs for real.

Skipped here: this machine has no icpx and no Intel GPU (tests/conftest.py skips ``icpx`` tests when
icpx is not on PATH; the run tests also skip when ``sycl-ls`` lists no Level Zero GPU).  On a machine
with both, run ``SYCL_TLA_DIR=/path/to/sycl-tla python -m pytest -q tests/plugins/sycl/test_sycl_icpx.py`` (see
docs/sycl_backend.md).  Each compile takes 30-100 s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelpilot.dsl_plugins.sycl import sycl_tla
from kernelpilot.dsl_plugins.sycl.kernels import all_kernels
from kernelpilot.targets import get_target_model
from kernelpilot.tile_tuner.builder import BuildCache, BuildItem, build_batch
from kernelpilot.tile_tuner.runner import run_program

pytestmark = [pytest.mark.icpx, pytest.mark.slow]
KERNELS = {k.kind: k for k in all_kernels()}
TARGET = os.environ.get("KP_TEST_XE_TARGET", "bmg")
SMALL = {
    "gemm": ({"M": 1000, "N": 1024, "K": 776}, "bf16"),
    "grouped_gemm": ({"shapes": [[300, 512, 256], [64, 1024, 512], [1, 256, 128]]}, "bf16"),
    "moe_gemm": ({"N": 512, "K": 256, "tokens_per_expert": [37, 0, 300, 5]}, "bf16"),
    "fa_prefill": ({"head_dim": 128, "batch": 2, "num_heads_q": 8, "num_heads_kv": 2, "seq_qo": 300, "seq_kv": 333, "causal": True}, "bf16"),
    "fa_decode": ({"head_dim": 64, "batch": 1, "num_heads_q": 8, "num_heads_kv": 1, "seq_qo": 1, "seq_kv": 1000}, "bf16"),
}  # fmt: skip


def _has_intel_gpu() -> bool:
    sycl_ls = shutil.which("sycl-ls")
    if sycl_ls is None:
        return False
    out = subprocess.run([sycl_ls], capture_output=True, text=True, timeout=60).stdout
    return "level_zero:gpu" in out


def _build(kind: str, tmp_path: Path, configs=None):
    kernel = KERNELS[kind]
    tree = sycl_tla.find_sycl_tla()
    if tree is None:
        pytest.skip("set SYCL_TLA_DIR to a sycl-tla checkout (or a pip --target folder) to compile")
    try:
        sycl_tla.check_tree_for_kind(tree, kind)
    except Exception as exc:  # noqa: BLE001
        pytest.skip(str(exc))
    dims, dtype = SMALL[kind]
    problem = kernel.validate_problem(dims, dtype, "test")
    model = get_target_model(TARGET)
    configs = configs or [model.default_config(kind, problem["dtype"], problem)]
    recipe = kernel.build_recipe(TARGET, {})
    items = [
        BuildItem.create(kernel.render(c, problem, TARGET), recipe, kernel.template_version, c.label())
        for c in configs
    ]
    outcomes = build_batch(items, recipe, BuildCache(tmp_path / "cache"), tmp_path / "work", jobs=2)
    return kernel, problem, items, outcomes


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_default_config_compiles(kind: str, tmp_path: Path) -> None:
    _, _, items, outcomes = _build(kind, tmp_path)
    for item in items:
        o = outcomes[item.cache_key]
        assert o.status == "built", f"{item.label}: {o.message} (log {o.log})"


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_default_config_runs_and_verifies(kind: str, tmp_path: Path) -> None:
    if not _has_intel_gpu():
        pytest.skip("no Level Zero GPU listed by sycl-ls (Intel GPU and driver needed to run)")
    kernel, problem, items, outcomes = _build(kind, tmp_path)
    for item in items:
        binary = outcomes[item.cache_key].binary
        assert binary is not None, outcomes[item.cache_key].message
        argv, env = kernel.run_command(binary, problem, {"warmup": 2, "iterations": 5, "repetitions": 3})
        run = run_program(argv, env, timeout_s=600)
        assert run.status == "ok", f"{item.label}: {run.status} {run.message}"
        result = run.result
        assert result.kernel == kind and result.verification.passed
        assert len(result.verification.checked) == 2 and result.time_ms.median > 0
        assert result.model_dump()["library_version"].startswith("sycl-tla ")


def test_streamk_and_splitk_runtime_variants_run(tmp_path: Path) -> None:
    if not _has_intel_gpu():
        pytest.skip("no Level Zero GPU listed by sycl-ls")
    model = get_target_model(TARGET)
    base = {"kernel": "gemm", "dtype": "bf16", "wg": [256, 256, 32], "sg": [8, 4, 1], "stages": 2}
    configs = [model.parse_config({**base, "schedule": s}) for s in ("streamk", "splitk")]
    kernel, problem, items, outcomes = _build("gemm", tmp_path, configs)
    for cfg, item in zip(configs, items, strict=True):
        binary = outcomes[item.cache_key].binary
        assert binary is not None, outcomes[item.cache_key].message
        for variant in kernel.runtime_variants(cfg, problem):
            argv, env = kernel.run_command(binary, problem, {**variant, "iterations": 3, "repetitions": 2})
            run = run_program(argv, env, timeout_s=600)
            assert run.status == "ok", f"{cfg.label()} {variant}: {run.message}"
            assert run.result.runtime["mode"] == variant["mode"]
