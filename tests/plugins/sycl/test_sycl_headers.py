"""Rendered programs against the real sycl-tla headers: every ``#include`` exists and every
``cutlass::`` / ``cute::`` name the programs spell out is declared there.

Headers: ``SYCL_TLA_DIR`` when set (a checkout), otherwise the ``sycl-tla`` wheel unpacked into pytest's
cache folder -- never into the test environment, where its top-level ``cutlass_library`` would clash with
``nvidia-cutlass`` -- plus ``applications/`` from the release archive (``tests/support/sycl_downloads.py``).
Without that archive the flash-attention checks skip and say so.  Indexing the headers takes ~30 s, hence
``slow``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.dsl_plugins.sycl import header_check, programs, sycl_tla
from kernelpilot.dsl_plugins.sycl.kernels import all_kernels
from kernelpilot.targets import get_target_model
from tests.support.sycl_downloads import Unavailable, cache_root, sycl_tla_tree

pytestmark = pytest.mark.slow
KERNELS = {k.kind: k for k in all_kernels()}


NO_FA_REASON: list[str] = []  # why the tree has no applications/ (filled by the fixture)


@pytest.fixture(scope="module")
def tree(request: pytest.FixtureRequest) -> sycl_tla.SyclTlaTree:
    try:
        found, why_no_fa = sycl_tla_tree(cache_root(request.config), applications=True)
    except Unavailable as exc:
        pytest.skip(str(exc))
    NO_FA_REASON.append(why_no_fa or "")
    return found


def _roots(tree: sycl_tla.SyclTlaTree) -> list[Path]:
    roots = [tree.include, tree.tools_include]
    roots += [p for p in (tree.applications, tree.moe_dir) if p is not None]
    return roots


PROBLEMS = {
    "gemm": ({"M": 4096, "N": 4096, "K": 4096}, ["bf16", "f16", "tf32", "s8", "u8", "e4m3", "s4", {"a": "bf16", "b": "s8"}]),
    "grouped_gemm": ({"shapes": [[512, 1024, 2048], [128, 4096, 512]]}, ["bf16", "e5m2", {"a": "f16", "b": "u4"}]),
    "moe_gemm": ({"N": 2880, "K": 2880, "num_experts": 8, "total_tokens": 4096}, ["bf16", "f16"]),
    "fa_prefill": ({"head_dim": 128, "batch": 1, "num_heads_q": 16, "seq_qo": 1024, "seq_kv": 1024, "causal": True}, ["bf16", "e4m3"]),
    "fa_decode": ({"head_dim": 64, "batch": 1, "num_heads_q": 8, "num_heads_kv": 1, "seq_kv": 4096}, ["bf16", "f16"]),
}  # fmt: skip


def _configs(kind: str, problem: dict):
    """The library default, every schedule the model accepts, and a spread of enumerated configs."""
    model = get_target_model("bmg")
    out = []
    default = model.default_config(kind, problem["dtype"], problem)
    if model.check(default, problem).valid:
        out.append(default)
    space = list(model.enumerate(kind, problem["dtype"], problem))
    out += space[:: max(1, len(space) // 6)]
    if kind == "gemm":
        for schedule in ("persistent", "streamk", "splitk"):
            raw = {**default.as_dict(), "schedule": schedule}
            cfg = model.parse_config(raw)
            if model.check(cfg, problem).valid:
                out.append(cfg)
    if kind == "fa_decode":
        out += [c for c in space if c.as_dict()["persistent"]][:2]
    return out


@pytest.mark.parametrize("kind", sorted(PROBLEMS))
def test_programs_only_use_headers_and_names_sycl_tla_has(tree: sycl_tla.SyclTlaTree, kind: str) -> None:
    if kind.startswith("fa_") and tree.applications is None:
        pytest.skip(
            f"{tree.root} ({tree.source}) has no applications/flash_attention_v2 -- the sycl-tla wheel does not "
            f"ship it: {NO_FA_REASON[-1] if NO_FA_REASON else ''}"
        )
    dims, dts = PROBLEMS[kind]
    checked = 0
    for dt in dts:
        problem = KERNELS[kind].validate_problem(dims, dt, "test")
        for cfg in _configs(kind, problem):
            sources = programs.render_program(kind, cfg, problem, "bmg", tree.key())
            report = header_check.check_program(sources, sycl_tla.include_dirs(tree, kind), _roots(tree))
            assert report.ok, f"{kind} {cfg.label()} ({dt}): {report}"
            assert report.checked_includes >= 10 and report.checked_names >= 15
            checked += 1
    assert checked >= len(dts)


def test_checker_catches_a_wrong_name_and_a_missing_header(tree: sycl_tla.SyclTlaTree) -> None:
    problem = KERNELS["gemm"].validate_problem({"M": 256, "N": 256, "K": 256}, "bf16", "test")
    sources = programs.render_program("gemm", {"wg": [256, 256, 32], "sg": [8, 4, 1]}, problem, "bmg", "x")
    src = sources["gemm.cpp"]
    bad = dict(sources)
    bad["gemm.cpp"] = src.replace("MainloopXeL1Staged<", "MainloopXeL1Stagged<").replace(
        '#include "cutlass/gemm/collective/collective_mma.hpp"',
        '#include "cutlass/gemm/collective/xe_mma_v2.hpp"',
    )
    report = header_check.check_program(bad, sycl_tla.include_dirs(tree, "gemm"), _roots(tree))
    assert not report.ok
    assert report.missing_includes == ["cutlass/gemm/collective/xe_mma_v2.hpp"]
    assert any("MainloopXeL1Stagged" in m for m in report.missing_names)
    good = header_check.check_program(sources, sycl_tla.include_dirs(tree, "gemm"), _roots(tree))
    assert good.ok, good


def test_detected_version_and_kind_support(tree: sycl_tla.SyclTlaTree) -> None:
    assert tree.version != "unknown"
    assert tree.cutlass_version.count(".") == 2
    sycl_tla.check_tree_for_kind(tree, "gemm")
    sycl_tla.check_tree_for_kind(tree, "moe_gemm")  # the wheel ships examples/12 (the MoE headers)
    assert tree.moe_dir is not None
