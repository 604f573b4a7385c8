"""The cuda plugin's ``kp_tile_kernels`` hook implementation.

``KERNEL_FACTORIES`` is a module-level tuple of zero-argument callables, each returning one
:class:`~kernelpilot.tile_tuner.kernel_api.TileKernel`.  To add a kernel kind (grouped GEMM, MoE GEMM,
FMHA ...), append its factory with a one-line edit; the import of a factory's module happens only
when the hook is called, so a broken kernel module cannot break plugin discovery.
"""

from __future__ import annotations

from typing import Any

from kernelpilot.dsl_plugins.cuda.grouped_factories import GROUPED_AND_FMHA_FACTORIES
from kernelpilot.hookspecs import hookimpl


def _gemm() -> Any:
    from kernelpilot.dsl_plugins.cuda.gemm import CutlassSm90Gemm

    return CutlassSm90Gemm()


KERNEL_FACTORIES: tuple[Any, ...] = (_gemm,)
KERNEL_FACTORIES += GROUPED_AND_FMHA_FACTORIES  # grouped_gemm, moe_gemm, fa_prefill, fa_decode


@hookimpl
def kp_tile_kernels() -> list[Any]:
    return [factory() for factory in KERNEL_FACTORIES]
