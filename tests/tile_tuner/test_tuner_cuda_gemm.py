"""The CUTLASS sm90a GEMM program: rendering for every legal config, and one real nvcc build (slow)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from kernelpilot import toolchain
from kernelpilot.dsl_plugins.cuda.gemm import CutlassSm90Gemm, render_source
from kernelpilot.hw_models.sm90.model import Sm90Model
from kernelpilot.tile_tuner.builder import BuildCache, BuildItem, build_batch

PROBLEM = {"M": 3000, "N": 3000, "K": 3000, "layout": "rr", "dtype": "bf16"}


def test_every_legal_config_renders_with_matching_schedule_pairs():
    model, kernel = Sm90Model(), CutlassSm90Gemm()
    configs = list(model.enumerate("gemm", "bf16", PROBLEM))
    assert len(configs) > 50
    for cfg in configs:
        d = cfg.as_dict()
        src = kernel.render(cfg, PROBLEM, "sm90").sources["gemm.cu"]
        tm, tn, tk = d["tile"]
        assert f"Shape<_{tm}, _{tn}, _{tk}>" in src
        kernel_sched = re.search(r"using KernelSchedule = (.*);", src).group(1)
        epi_sched = re.search(r"using EpilogueSchedule = (.*);", src).group(1)
        # cooperative mainloop <-> cooperative TMA epilogue, others <-> TmaWarpSpecialized
        if d["epilogue"] == "nosmem":
            assert epi_sched == "cutlass::epilogue::NoSmemWarpSpecialized"
        elif "Cooperative" in kernel_sched:
            assert epi_sched == "cutlass::epilogue::TmaWarpSpecializedCooperative"
        else:
            assert epi_sched == "cutlass::epilogue::TmaWarpSpecialized"
        assert ("StreamKScheduler" in src) == (d["tile_scheduler"] == "streamk")


def test_sizes_are_runtime_arguments_so_shapes_share_one_binary():
    cfg = {"tile": [128, 128, 64], "cluster": [1, 1], "schedule": "pingpong"}
    a = render_source(cfg, "bf16", "rr")
    assert a == render_source(cfg, "bf16", "rr")
    k = CutlassSm90Gemm()
    assert k.render(cfg, {**PROBLEM, "M": 16}, "sm90") == k.render(cfg, {**PROBLEM, "M": 8192}, "sm90")
    argv, _ = k.run_command(
        Path("/x/program"),
        {**PROBLEM, "M": 16},
        {"variants": [{"raster": "N", "swizzle": 8, "decomp": "S", "splits": 4}]},
    )
    assert "--m=16" in argv and "--variants=N:8:S:4" in argv


def test_stream_k_workspace_reset_per_launch_is_cutlass_own_and_results_are_checked_after_timing():
    """Each timed launch resets only what CUTLASS's adapter resets per call (the scheduler's barrier
    counters, via GemmKernel::initialize_workspace); zeroing the whole workspace (megabytes of memset
    per launch for stream-K, timed with the kernel) needs --workspace_reset=full.  Stale counters
    would corrupt only repeated launches, so the output is checked again after the timed ones."""
    cfg = {"tile": [256, 128, 64], "cluster": [1, 1], "schedule": "cooperative", "tile_scheduler": "streamk"}
    src = CutlassSm90Gemm().render(cfg, PROBLEM, "sm90").sources["gemm.cu"]
    launch = re.search(
        r"static cudaError_t launch\(Launch& L, cudaStream_t s\) \{(.*?)\n\}", src, re.S
    ).group(1)
    reset = launch.index("GemmKernel::initialize_workspace(L.args, L.workspace, s)")
    assert (
        launch.index("if (L.full_reset)")
        < launch.index("cudaMemsetAsync")
        < reset
        < launch.index("L.gemm.run(s)")
    )
    assert 'key == "workspace_reset"' in src and "must be cutlass or full" in src
    timed = src.index("cudaGraphExecDestroy(graph_exec)")
    assert src.index("check after the timed launches", timed) < src.index("++n_ok;", timed)
    assert CutlassSm90Gemm.template_version == "gemm_sm90-3"


def test_runtime_variants_include_split_k_only_for_stream_k_builds_on_small_grids():
    k = CutlassSm90Gemm()
    coop = {"tile": [128, 256, 64], "cluster": [1, 1], "schedule": "cooperative", "tile_scheduler": "streamk"}
    skinny = {"M": 64, "N": 4096, "K": 14336, "dtype": "bf16", "layout": "rr"}
    decomps = {v["decomp"] for v in k.runtime_variants(coop, skinny)}
    assert {"D", "K", "S"} <= decomps
    pp = {"tile": [128, 128, 64], "cluster": [1, 1], "schedule": "pingpong"}
    assert {v["decomp"] for v in k.runtime_variants(pp, skinny)} == {"H"}


def test_problem_validation_names_the_field():
    from kernelpilot.errors import InputError

    with pytest.raises(InputError, match="K=12"):
        CutlassSm90Gemm().validate_problem({"M": 8, "N": 8, "K": 12}, "bf16", "w")
    with pytest.raises(InputError, match="dtype"):
        CutlassSm90Gemm().validate_problem({"M": 8, "N": 8, "K": 8}, "s4", "w")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.skipif(toolchain.find_headers("cutlass") is None, reason="needs CUTLASS headers (CUTLASS_DIR)")
def test_real_nvcc_build_through_cmake_and_ninja(tmp_path):
    """One real sm90a build of the template via the builder (~100 s, ~3.4 GB); set KERNELPILOT_BUILD_LOCK
    on shared machines.  Also checks the ptxas report: no spills."""
    kernel = CutlassSm90Gemm()
    recipe = kernel.build_recipe("sm90", {})
    cfg = {"tile": [128, 128, 64], "cluster": [1, 2], "schedule": "pingpong"}
    item = BuildItem.create(kernel.render(cfg, PROBLEM, "sm90"), recipe, kernel.template_version, "pp")
    out = build_batch([item], recipe, BuildCache(tmp_path / "cache"), tmp_path / "work", jobs=1)
    o = out[item.cache_key]
    assert o.status == "built", (o.message, o.log and o.log.read_text()[-2000:])
    assert os.access(o.binary, os.X_OK)
    log = o.log.read_text()
    assert "0 bytes spill stores" in log and not re.search(r"[1-9]\d* bytes spill stores", log)
    again = build_batch([item], recipe, BuildCache(tmp_path / "cache"), tmp_path / "work", jobs=1)
    assert again[item.cache_key].status == "cached"


SKINNY = {"M": 16, "N": 4096, "K": 14336, "layout": "rr", "dtype": "bf16"}


def test_swap_ab_is_enumerated_only_for_tiny_m_and_renders_the_transposed_problem():
    """Swap-AB computes D^T = B^T A^T: the tile's M walks the problem's N (column-major views of the same
    buffers, so the host-side check of D = A @ B is unchanged)."""
    model, kernel = Sm90Model(), CutlassSm90Gemm()
    swapped = [c for c in model.enumerate("gemm", "bf16", SKINNY) if c.swap_ab]
    assert swapped and {c.tile[1] for c in swapped} == {16, 32} and {c.tile[0] for c in swapped} == {64, 128}
    assert not any(c.swap_ab for c in model.enumerate("gemm", "bf16", {**SKINNY, "M": 64}))
    assert not any(c.swap_ab for c in model.enumerate("gemm", "bf16", PROBLEM))
    cfg = model.parse_config({"tile": [128, 16, 64], "cluster": [2, 1], "schedule": "cooperative",
                              "tile_scheduler": "streamk", "swap_ab": True})  # fmt: skip
    assert cfg.label().endswith("_swap") and cfg.as_dict()["swap_ab"] is True
    assert "swap_ab" not in model.parse_config({"tile": [128, 16, 64]}).as_dict()  # recorded keys unchanged
    assert not model.check(cfg.model_copy(update={"kernel": "grouped_gemm"})).valid
    src = kernel.render(cfg, SKINNY, "sm90").sources["gemm.cu"]
    assert re.search(r"using LayoutA = cutlass::layout::ColumnMajor;", src)  # B^T of a row-major B
    assert re.search(r"using LayoutD = cutlass::layout::ColumnMajor;", src)
    assert "{int(N), int(M), int(K), 1}" in src and "{buf.b, sa, buf.a, sb}" in src
    plain = kernel.render(cfg.model_copy(update={"swap_ab": False}), SKINNY, "sm90").sources["gemm.cu"]
    assert "swap-AB" not in plain and "{buf.a, sa, buf.b, sb}" in plain
    # run-time variants see the swapped grid: 4096/128 x 16/16 = 32 tiles -> split-K / stream-K tried
    assert {v["decomp"] for v in kernel.runtime_variants(cfg, SKINNY)} >= {"K", "S"}


def test_cost_of_a_swapped_config_is_the_cost_of_the_transposed_problem():
    model = Sm90Model()
    cfg = model.parse_config({"tile": [64, 16, 128], "schedule": "pingpong", "swap_ab": True})
    plain = cfg.model_copy(update={"swap_ab": False})
    transposed = {**SKINNY, "M": SKINNY["N"], "N": SKINNY["M"]}
    assert model.estimate_time_s(cfg, SKINNY, "h200") == pytest.approx(
        model.estimate_time_s(plain, transposed, "h200")
    )


def test_swap_ab_bad_values_and_filter_fields_are_input_errors(tmp_path):
    """``swap_ab`` must be a boolean, and a space filter on an unknown field exits 2 naming the allowed
    fields (``swap_ab`` among them, although ``as_dict`` omits it when false) and writes nothing."""
    from kernelpilot.errors import InputError
    from tests.support import run_cli

    with pytest.raises(InputError, match="swap_ab must be true or false, got 'yes'"):
        Sm90Model().parse_config({"tile": [64, 16, 64], "swap_ab": "yes"})
    out = tmp_path / "o"
    r = run_cli("tune", "--target", "sm90", "--kernel", "gemm", "--dims", "M=16,N=4096,K=14336",
                "--space-filter", '{"swapab": [true]}', "--dry-run", "--out", str(out))  # fmt: skip
    assert r.returncode == 2
    assert "'swapab' is not a config field" in r.stderr and "swap_ab" in r.stderr
    assert not out.exists()
    r = run_cli("tune", "--target", "sm90", "--kernel", "gemm", "--dims", "M=16,N=4096,K=14336",
                "--space-filter", '{"swap_ab": [true], "tile_k": [64]}', "--dry-run", "--out", str(out), "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    [w] = json.loads(r.stdout)["workloads"]
    planned = [c for c in w["planned"] if not c["is_default"]]
    assert planned and all(c["label"].endswith("_swap") for c in planned)
