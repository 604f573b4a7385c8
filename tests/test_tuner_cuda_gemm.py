"""The CUTLASS sm90a GEMM program: rendering for every legal config, and one real nvcc build (slow)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from kernelpilot import toolchain
from kernelpilot.dsl_plugins.cuda.gemm import CutlassSm90Gemm, render_source
from kernelpilot.hw_models.sm90 import Sm90Model
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
        # E1/E3: cooperative mainloop <-> cooperative TMA epilogue, others <-> TmaWarpSpecialized
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
