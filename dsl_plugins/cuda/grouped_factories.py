"""Lazy factories for the cuda plugin's grouped GEMM, MoE GEMM and FMHA tile kernels.

``tile_kernels.KERNEL_FACTORIES`` appends :data:`GROUPED_AND_FMHA_FACTORIES`; each factory imports its kernel
module only when called, so a broken kernel module cannot break plugin discovery.
"""

from __future__ import annotations

from typing import Any


def grouped_gemm() -> Any:
    from kernelpilot.dsl_plugins.cuda.grouped_gemm import GroupedGemmKernel

    return GroupedGemmKernel()


def moe_gemm() -> Any:
    from kernelpilot.dsl_plugins.cuda.moe_gemm import MoeGemmKernel

    return MoeGemmKernel()


def fa_prefill() -> Any:
    from kernelpilot.dsl_plugins.cuda.fmha import FmhaKernel

    return FmhaKernel("fa_prefill")


def fa_decode() -> Any:
    from kernelpilot.dsl_plugins.cuda.fmha import FmhaKernel

    return FmhaKernel("fa_decode")


GROUPED_AND_FMHA_FACTORIES: tuple[Any, ...] = (grouped_gemm, moe_gemm, fa_prefill, fa_decode)
