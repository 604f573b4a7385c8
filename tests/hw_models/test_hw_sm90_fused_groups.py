"""The fused-groups launch (``launch: fused``): the dense cooperative kernel's collectives over every group in
one persistent launch, each group's TMA descriptors built on the host and passed in the kernel parameters.
Normalisation, legality, the rendered program, the program's tile walk (compiled with g++), the cost model
and enumeration on the CPU; one real nvcc build; on a GPU, the program's own checks.

Why the launch exists: on one group holding all of a workload's rows the ptr-array grouped kernel took
1.07-1.19x the dense kernel's time with the same tile, and launched once per group the dense kernel pays a
ramp and a last partial wave per group.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelpilot.dsl_plugins.cuda.grouped_gemm import (
    GroupedGemmKernel,
    config_label,
    normalize_gemm_config,
    render_grouped_program,
)
from kernelpilot.hw_models.catalogue import get_device
from kernelpilot.hw_models.sm90.cost import SM90_PTR_ARRAY_RAMP_S, sm90_time_s
from kernelpilot.hw_models.sm90.gemm import FUSED_MAX_GROUPS
from kernelpilot.targets import get_target_model
from tests.support.grouped_programs import compile_for_sm90a

REPO = Path(__file__).resolve().parents[2]
CUTLASS = REPO / ".deps" / "cutlass"
NVCC = shutil.which("nvcc")
H200 = get_device("h200")
# Llama-3-8B MLP up over 8 requests (benchmarks/cuda_kinds_common.py's shape, fixed token counts)
LLAMA_TOKENS = [256, 700, 1024, 1536, 2048, 311, 999, 1400]
LLAMA = {"groups": [[m, 14336, 4096] for m in LLAMA_TOKENS], "dtype": "bf16", "layout": "rc"}


def _cfg(tile=(128, 256, 64), cluster=(1, 1), **extra):
    raw = {"kernel": "grouped_gemm", "tile": list(tile), "cluster": list(cluster), "schedule": "cooperative",
           "launch": "fused"}  # fmt: skip
    return get_target_model("sm90").parse_config({**raw, **extra})


def test_config_normalisation_and_labels() -> None:
    cfg = normalize_gemm_config({"tile": [128, 256, 64], "launch": "fused"})
    assert cfg["launch"] == "fused" and cfg["tile_scheduler"] == "persistent"
    assert config_label(cfg) == "coop_128x256x64_c1x1_tma_fused"
    assert _cfg(cluster=(2, 1)).label() == "128x256x64_c2x1_coop_fused"
    for bad, word in (
        ({"schedule": "pingpong"}, "cooperative"),
        ({"tile_scheduler": "streamk"}, "persistent"),
        ({"swap_ab": True}, "swap_ab"),
        ({"streams": 2}, "streams"),
    ):
        with pytest.raises(ValueError, match=word):
            normalize_gemm_config({"tile": [128, 256, 64], "launch": "fused", **bad})


def test_the_fused_launch_is_legal_only_as_the_cooperative_persistent_unswapped_kernel() -> None:
    sm90 = get_target_model("sm90")
    assert sm90.check(_cfg(), LLAMA).valid
    assert sm90.check(_cfg(tile=(256, 128, 64), cluster=(2, 1)), LLAMA).valid
    for extra, word in (
        ({"schedule": "pingpong"}, "cooperative"),
        ({"tile_scheduler": "streamk"}, "persistent"),
        ({"swap_ab": True, "tile": [256, 176, 64]}, "swap_ab"),
        ({"streams": 2}, "streams"),
        ({"kernel": "gemm"}, "grouped_gemm / moe_gemm"),
    ):
        problem = (
            {"M": 1024, "N": 14336, "K": 4096, "dtype": "bf16"} if extra.get("kernel") == "gemm" else LLAMA
        )
        res = sm90.check(_cfg(**extra), problem)
        assert not res.valid and any(word in v.message for v in res.violations), (extra, res.violations)


def test_more_groups_than_the_kernel_parameters_hold_are_refused() -> None:
    sm90 = get_target_model("sm90")
    many = {"groups": [[256, 4096, 4096]] * (FUSED_MAX_GROUPS + 1), "dtype": "bf16", "layout": "rc"}
    res = sm90.check(_cfg(), many)
    assert not res.valid and [v.rule for v in res.violations] == ["sm90.fused_groups"]
    assert str(FUSED_MAX_GROUPS) in res.violations[0].message
    assert sm90.check(_cfg(), {**many, "groups": many["groups"][:FUSED_MAX_GROUPS]}).valid


def _render(cfg: dict) -> str:
    return render_grouped_program("grouped_gemm", normalize_gemm_config(cfg), "bf16").sources.popitem()[1]


def test_the_program_pastes_the_fused_kernel_over_the_dense_kernels_types() -> None:
    src = _render({"tile": [128, 256, 64], "cluster": [2, 1], "launch": "fused"})
    assert "kernelpilot::FusedGroupsGemmSm90<GemmKernel, kMaxGroups>" in src
    assert f"constexpr int kMaxGroups = {FUSED_MAX_GROUPS};" in src
    assert "sizeof(typename FusedKernel::Params) <= 32764" in src
    # the dense kernel's types (not the ptr-array kernel's), with the config's tile and cluster
    assert "cutlass::gemm::KernelTmaWarpSpecializedCooperative" in src
    assert "using KernelSchedule = cutlass::gemm::KernelPtrArray" not in src
    assert (
        "using TileShape = Shape<_128, _256, _64>;" in src
        and "using ClusterShape = Shape<_2, _1, _1>;" in src
    )
    # the kernel body is in the source (the build-cache key covers it), without a header's guard
    assert "struct FusedGroupsGemmSm90" in src and "#pragma once" not in src
    assert "cudaLaunchKernelEx(&cfg, cutlass::device_kernel<FusedKernel>" in src
    # the other launches render without it
    assert "FusedGroupsGemmSm90" not in _render({"tile": [128, 256, 64]})


def _tile_walk(work: Path, cluster: tuple[int, int], tiles: list[tuple[int, int]], raster: str, swizzle: int):
    """Every (group, m, n) the program's work_of gives each CTA of a cluster, over all units, via g++."""
    header = (REPO / "cpp_templates" / "cuda" / "fused_groups_gemm_sm90.hpp").read_text()
    body = re.search(r"  CUTLASS_DEVICE static Work work_of\(.*?\n  \}\n", header, re.S)
    assert body, "the kernel has no work_of"
    cm, cn = cluster
    units = [(-(-tm // cm), -(-tn // cn)) for tm, tn in tiles]
    starts = [0]
    for um, un in units:
        starts.append(starts[-1] + um * un)
    harness = work / "walk.cpp"
    harness.write_text(
        "#include <algorithm>\n#include <cstdio>\nusing std::min;\n#define CUTLASS_DEVICE\n"
        "struct Params { int units_m[64], units_n[64], unit_start[65]; int groups, raster, swizzle; };\n"
        f"struct Walk {{ static constexpr int kClusterM = {cm}, kClusterN = {cn};\n"
        "  struct Work { int group, m, n; };\n" + body.group(0) + "};\n"
        "int main() { Params p{};\n"
        + "".join(f"  p.units_m[{i}] = {um}; p.units_n[{i}] = {un};\n" for i, (um, un) in enumerate(units))
        + "".join(f"  p.unit_start[{i}] = {s};\n" for i, s in enumerate(starts))
        + f"  p.groups = {len(tiles)}; p.raster = '{raster}'; p.swizzle = {swizzle};\n"
        f"  for (int u = 0; u < {starts[-1]}; ++u) for (int x = 0; x < {cm}; ++x) for (int y = 0; y < {cn}; ++y) {{\n"
        "    auto w = Walk::work_of(p, u, x, y); printf(\"%d %d %d %d\\n\", u, w.group, w.m, w.n); } }\n"
    )  # fmt: skip
    exe = work / "walk"
    subprocess.run(["g++", "-std=c++17", str(harness), "-o", str(exe)], check=True, timeout=120)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    return [tuple(int(x) for x in line.split()) for line in out if line]


@pytest.mark.skipif(not shutil.which("g++"), reason="needs g++")
@pytest.mark.parametrize("cluster", [(1, 1), (2, 1), (1, 2)])
@pytest.mark.parametrize(("raster", "swizzle"), [("M", 1), ("M", 4), ("N", 2), ("N", 8)])
def test_every_tile_of_every_group_is_walked_exactly_once(tmp_path, cluster, raster, swizzle) -> None:
    # tile counts per group (M tiles, N tiles): odd counts leave partial clusters and partial swizzle strips
    tiles = [(3, 7), (1, 1), (8, 56), (5, 2)]
    walked = _tile_walk(tmp_path, cluster, tiles, raster, swizzle)
    cm, cn = cluster
    seen = sorted((g, m, n) for _, g, m, n in walked)
    # the grid is whole clusters: a group's tiles rounded up to the cluster, as the dense kernel's grid
    want = sorted(
        (g, m, n)
        for g, (tm, tn) in enumerate(tiles)
        for m in range(-(-tm // cm) * cm)
        for n in range(-(-tn // cn) * cn)
    )
    assert seen == want
    # the CTAs of one cluster share the unit: same group, the cluster's block of tiles
    by_unit: dict[int, set] = {}
    for u, g, m, n in walked:
        by_unit.setdefault(u, set()).add((g, m // cm, n // cn))
    assert all(len(v) == 1 for v in by_unit.values())
    # swizzle 1 along M walks a group's M tiles first, as the dense kernel's raster along M
    if (raster, swizzle, cluster) == ("M", 1, (1, 1)):
        first = [(m, n) for _, g, m, n in walked if g == 0][:4]
        assert first == [(0, 0), (1, 0), (2, 0), (0, 1)]


def test_the_fused_launch_is_timed_with_its_swizzle_variants() -> None:
    """The fused kernel's own walk applies the swizzle (CUTLASS's group scheduler ignores it), so its runs
    measure swizzle 2-8 in both raster orders; the ptr-array launch keeps its two orders."""
    kernel = GroupedGemmKernel()
    fused = kernel.runtime_variants({"tile": [128, 256, 64], "launch": "fused"}, LLAMA)
    assert {(v["raster"], v["swizzle"]) for v in fused} == {(r, s) for r in "MN" for s in (1, 2, 4, 8)}
    grouped = kernel.runtime_variants({"tile": [128, 256, 64]}, LLAMA)
    assert {(v["raster"], v["swizzle"]) for v in grouped} == {("M", 1), ("N", 1)}


def test_the_fused_estimate_is_the_grouped_grid_without_the_ptr_array_ramp() -> None:
    fused = _cfg()
    grouped = fused.model_copy(update={"launch": "grouped"})
    assert grouped.ptr_array and not fused.ptr_array
    delta = sm90_time_s(grouped, LLAMA, H200) - sm90_time_s(fused, LLAMA, H200)
    assert delta == pytest.approx(SM90_PTR_ARRAY_RAMP_S, rel=1e-9)


@pytest.mark.slow
@pytest.mark.extra_build
@pytest.mark.skipif(
    NVCC is None or not (CUTLASS / "cutlass_library" / "source" / "include").is_dir(),
    reason="needs nvcc and the CUTLASS headers (pip install --target .deps/cutlass nvidia-cutlass)",
)
def test_the_fused_program_compiles_for_sm90a(tmp_path) -> None:
    src = _render({"tile": [128, 256, 64], "cluster": [1, 2], "launch": "fused"})
    compile_for_sm90a(NVCC, src, tmp_path, CUTLASS)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_the_fused_program_passes_its_checks_on_the_gpu(tmp_path) -> None:
    """Ragged groups (partial tiles in M, N and K, an empty group) through the program's own check, which
    poisons every output first; then more groups than the kernel parameters hold is a clear refusal."""
    from kernelpilot.errors import ToolMissingError
    from kernelpilot.tile_tuner.runner import run_program

    kernel = GroupedGemmKernel()
    try:  # the CUTLASS headers the backend finds (CUTLASS_DIR, or the nvidia-cutlass package)
        recipe = kernel.build_recipe("sm90", {})
    except ToolMissingError as exc:
        pytest.skip(str(exc))
    cfg = normalize_gemm_config({"tile": [128, 256, 64], "cluster": [2, 1], "launch": "fused"})
    src = render_grouped_program("grouped_gemm", cfg, "bf16").sources.popitem()[1]
    (tmp_path / "p.cu").write_text(src)
    exe = tmp_path / "p"
    subprocess.run(
        [
            NVCC,
            *recipe.flags,
            *(f"-I{d}" for d in recipe.include_dirs),
            str(tmp_path / "p.cu"),
            "-o",
            str(exe),
        ],
        check=True,
        capture_output=True,
        timeout=1200,
    )
    ragged = "712x520x264,3x136x264,200x264x136,0x64x64,128x64x512,1000x4096x1024,37x8x8"
    out = run_program(
        [str(exe), f"--groups={ragged}", "--verify_rows=0", "--variants=M:1,N:2,M:8"], {}, 300.0
    )
    assert out.status == "ok", out.message
    checks = out.raw["verification"]["checked"]
    assert out.raw["verification"]["passed"] and len(checks) == 4 and all(c["passed"] for c in checks)
    too_many = ",".join(["64x64x64"] * (FUSED_MAX_GROUPS + 1))
    r = subprocess.run([str(exe), f"--groups={too_many}", "--verify=0"], capture_output=True, text=True)
    assert (
        r.returncode == 3
        and f"at most {FUSED_MAX_GROUPS}" in json.loads(r.stdout.splitlines()[-1])["message"]
    )
