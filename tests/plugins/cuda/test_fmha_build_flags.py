"""The FMHA programs build with ``-ftz=true``: what the flag changes in the recipe, the build-cache key and
the machine code (one real nvcc build, gated on nvcc, CUTLASS's example 88 and cuobjdump)."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelpilot.dsl_plugins.cuda.fmha import FMHA_NVCC_FLAGS, FmhaKernel, fmha_include_dir
from kernelpilot.dsl_plugins.cuda.grouped_gemm import NVCC_FLAGS, GroupedGemmKernel
from kernelpilot.dsl_plugins.cuda.sass import find_cuobjdump, opcode_counts
from kernelpilot.errors import ToolMissingError
from kernelpilot.tile_tuner.builder import BuildItem

DECODE = FmhaKernel("fa_decode")
HD64_DECODE = DECODE.validate_problem(
    {"batch": 64, "num_heads_q": 64, "num_heads_kv": 8, "seq_kv": 4096, "head_dim": 64}, "bf16", "w"
)
TMA_64 = {"tile": [64, 64, 64], "schedule": "tma"}


def test_fmha_recipe_is_the_grouped_recipe_plus_ftz():
    fmha = FmhaKernel("fa_prefill").build_recipe("sm90", {"dry_run": True})
    grouped = GroupedGemmKernel().build_recipe("sm90", {"dry_run": True})
    assert fmha.flags == FMHA_NVCC_FLAGS == (*NVCC_FLAGS, "-ftz=true")
    # the GEMM kinds have no exponentials: their binaries stay as built
    assert "-ftz=true" not in grouped.flags
    assert DECODE.build_recipe("sm90", {"dry_run": True}).flags == fmha.flags


def test_a_program_built_without_the_flag_is_not_served_from_the_cache():
    """The flag is part of the build-cache key, so a binary cached before it (same source) is not reused."""
    recipe = DECODE.build_recipe("sm90", {"dry_run": True})
    program = DECODE.render(TMA_64, HD64_DECODE, "sm90")
    with_flag = BuildItem.create(program, recipe, DECODE.template_version).cache_key
    without = BuildItem.create(
        program, dataclasses.replace(recipe, flags=NVCC_FLAGS), DECODE.template_version
    )
    assert with_flag != without.cache_key


SASS = """
        code for sm_90a
                Function : _Z4fillPf
        .headerflags    @"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                      /* 0x00000a00ff017b82 */
        /*0010*/                   FMUL R2, R2, 0.5 ;                          /* 0x3f00000002027820 */
        /*0020*/                   EXIT ;                                      /* 0x000000000000794d */
                Function : _ZN7cutlass13device_kernelI4FmhaEEvT_
        .headerflags    @"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   FSETP.GEU.AND P0, PT, R4, -126, PT ;         /* 0x0000000000007802 */
        /*0010*/              @!P0 FMUL R4, R4, 0.5 ;                          /* 0x0000000000007802 */
        /*0020*/                   MUFU.EX2 R5, R4 ;                           /* 0x0000000000007802 */
        /*0030*/              @!P0 FMUL R5, R5, R5 ;                           /* 0x0000000000007802 */
        /*0040*/               @UP0 HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], R24 ;  /* 0x0000000000007802 */
        /*0050*/                   BRA 0x50;                                   /* 0x0000000000007802 */
"""


def test_opcode_counts_are_per_function_with_predicates_and_modifiers_dropped():
    counts = opcode_counts(SASS)
    assert list(counts) == ["_Z4fillPf", "_ZN7cutlass13device_kernelI4FmhaEEvT_"]
    assert counts["_Z4fillPf"] == {"LDC": 1, "FMUL": 1, "EXIT": 1}
    fmha = counts["_ZN7cutlass13device_kernelI4FmhaEEvT_"]
    assert fmha == {"FSETP": 1, "FMUL": 2, "MUFU": 1, "HGMMA": 1, "BRA": 1}


def _compile_tools() -> str | None:
    """Why the real build cannot run here, or None."""
    if shutil.which("nvcc") is None:
        return "needs nvcc"
    if not fmha_include_dir(required=False):
        return "needs CUTLASS headers with examples/88_hopper_fmha (README setup: .deps/cutlass)"
    try:
        find_cuobjdump()
    except ToolMissingError as exc:
        return str(exc)
    return None


def _build_cubin(config: dict, folder: Path) -> dict[str, int]:
    """The FMHA kernel's SASS opcode counts of ``config`` on the hd64 decode problem, built with the recipe."""
    recipe = DECODE.build_recipe("sm90", {})
    ((name, text),) = DECODE.render(config, HD64_DECODE, "sm90").sources.items()
    source = folder / name
    source.write_text(text)
    cubin = source.with_suffix(".cubin")
    flags = [f for f in recipe.flags if f not in ("-Xptxas", "-v")]
    includes = [f"-I{p}" for p in recipe.include_dirs]
    done = subprocess.run([recipe.compiler, *flags, *includes, "-cubin", "-o", str(cubin), str(source)],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    from kernelpilot.dsl_plugins.cuda.sass import cubin_opcode_counts

    return next(c for f, c in cubin_opcode_counts(cubin).items() if "fmha" in f.lower())


@pytest.fixture(scope="module")
def decode_kernels(tmp_path_factory) -> dict[str, dict[str, int]]:
    """The 64x64x64 KernelTma decode program built twice, in parallel: as is and with every fourth
    exponential on the FMA pipe (``exp2_emulation``: the softmax specialization must compile, on the
    interleaved softmax KernelTma uses)."""
    from concurrent.futures import ThreadPoolExecutor

    folder = tmp_path_factory.mktemp("fmha_sass")
    configs = {"plain": TMA_64, "ex4": {**TMA_64, "exp2_emulation": 4}}
    with ThreadPoolExecutor(max_workers=2) as pool:
        built = dict(zip(configs, pool.map(lambda c: _build_cubin(c, folder), configs.values()), strict=True))
    return built


@pytest.mark.skipif(_compile_tools() is not None, reason=_compile_tools() or "")
def test_the_decode_softmax_has_no_subnormal_path_around_its_exponentials(decode_kernels):
    """Built with the FMHA recipe, the kernel's MUFU.EX2 are bare: nvcc's subnormal wrapper (a range test
    and two multiplies per exponential) is gone.  Without -ftz=true the same source has at least one FSETP
    per MUFU (measured: 207 FSETP around 204 MUFU in the hd64 prefill kernel; fmha_ftz_sass_check.py)."""
    kernel = decode_kernels["plain"]
    assert kernel["MUFU"] >= 64  # the softmax of a 64x64 score tile is in there
    assert kernel["FSETP"] * 4 < kernel["MUFU"]


@pytest.mark.skipif(_compile_tools() is not None, reason=_compile_tools() or "")
def test_exp2_emulation_moves_a_quarter_of_the_exponentials_off_mufu(decode_kernels):
    """With exp2_emulation = 4 a quarter of the scores' MUFU.EX2 go (the O-rescale exponentials stay), and
    each one that goes becomes a round-down add, the cubic's three FMAs and an integer add on the
    exponent bits."""
    plain, ex4 = decode_kernels["plain"], decode_kernels["ex4"]
    moved = plain["MUFU"] - ex4["MUFU"]
    assert plain["MUFU"] * 0.18 <= moved <= plain["MUFU"] * 0.25
    assert ex4["FFMA"] - plain["FFMA"] >= 3 * moved
    assert ex4["HGMMA"] == plain["HGMMA"]
