"""Xe config types (GEMM family, flash attention), their fields, and the library's default stages.

Constants cite intel/sycl-tla at the commit named in :mod:`kernelpilot.hw_models.xe`.
"""

from __future__ import annotations

import math
from typing import Any

from kernelpilot.hw_models.axes import SearchAxis
from kernelpilot.hw_models.dtypes import FLOAT16, DTypePair
from kernelpilot.hw_models.types import TileConfig
from kernelpilot.hw_models.xe.dpas import (
    DpasAtom,
    builder_atom,
    default_atom_m,
    parse_atom,
)

GEMM_KERNELS = ("gemm", "grouped_gemm", "moe_gemm")
FA_KERNELS = ("fa_prefill", "fa_decode")
KERNELS = GEMM_KERNELS + FA_KERNELS
SCHEDULES = ("default", "streamk", "splitk")
#: schedule names accepted as another: ``persistent`` puts a PersistentScheduler on KernelXe, which
#: selects the same data-parallel launch as ``default`` (sycl-tla v0.9.1
#: include/cutlass/gemm/kernel/xe_gemm.hpp:82-87 scheduler selection, :185-193 one work-group per tile),
#: so a separate build would only measure the same kernel twice
SCHEDULE_ALIASES = {"persistent": "default"}
GEMM_FIELDS = ("kernel", "dtype", "wg", "sg", "stages", "schedule", "mma_atom", "atom_m")
FA_FIELDS = (
    "kernel",
    "dtype",
    "qk",
    "pv",
    "out",
    "sg_qk",
    "sg_pv",
    "head_dim",
    "stages",
    "causal",
    "persistent",
    "api",
)
FA_APIS = ("new", "legacy")

# Search axes (:mod:`kernelpilot.hw_models.axes`): every tile and subgroup layout is split into its
# extents, ordinal because they are powers of two or small multiples (64 -> 128 is the step 128 -> 256
# is), so a search that learns from measurements sees that a 256-wide work-group tile is closer to a
# 128-wide one than to a 32-wide one.  Schedules, atoms and flags stay categorical.
GEMM_AXES = (
    SearchAxis("wg", "ordinal", ("m", "n", "k")),
    SearchAxis("sg", "ordinal", ("m", "n", "k")),
    SearchAxis("stages", "int"),
    SearchAxis("atom_m", "ordinal"),
)
#: ShapeQK (Q, KV, D-chunk), ShapePV (Q, V, KV), ShapeOutput (Q, V; the legacy API adds K), subgroup
#: layouts in the same order (xe_fmha_fwd_mainloop.hpp:511-520)
FA_AXES = (
    SearchAxis("qk", "ordinal", ("q", "kv", "d")),
    SearchAxis("pv", "ordinal", ("q", "v", "kv")),
    SearchAxis("out", "ordinal", ("q", "v", "k")),
    SearchAxis("sg_qk", "ordinal", ("q", "kv", "d")),
    SearchAxis("sg_pv", "ordinal", ("q", "v", "kv")),
    SearchAxis("stages", "int"),
)

#: include/cutlass/gemm/collective/builders/xe_mma_builder.inl:95 ``MaxSG = 32``; docs
#: media/docs/cpp/cute/12_intel_performance_guide.md:26 "up to 32 subgroups per work-group"
MAX_SG = 32
#: large-GRF mode: 256 registers x 64 B per hardware thread (= one subgroup),
#: media/docs/cpp/cute/11_intel_gemm_companion.md:43,290-291
GRF_BYTES = 256 * 64
#: FA head dims compiled and tested in the repo (examples/06_bmg_flash_attention/CMakeLists.txt:36-60)
FA_TESTED_HEAD_DIMS = (64, 96, 128, 192)
FA_DTYPES = ("bf16", "f16", "e4m3", "e5m2")


# ==================================================================================================
# configs


class XeGemmConfig(TileConfig):
    """A sycl-tla GEMM-family configuration (gemm, grouped_gemm, moe_gemm)."""

    kernel: str = "gemm"
    dtype: DTypePair
    wg: tuple[int, int, int]
    sg: tuple[int, int, int] | None = None
    stages: int
    schedule: str = "default"
    mma_atom: str | None = None
    atom_m: int | None = None

    def builder_sg(self) -> tuple[int, int, int]:
        """The SG layout sycl-tla's CollectiveBuilder derives (xe_mma_builder.inl:89-98)."""
        wm, wn, wk = self.wg
        atom = builder_atom(self.dtype, math.gcd(8, wm))
        grid_m = max(1, wm // atom.m)
        grid_n = max(1, wn // 16)
        sg_m0 = min(grid_m, 8)
        sg_n = min(grid_n, MAX_SG // sg_m0)
        sg_m = min(grid_m, MAX_SG // sg_n)
        return (sg_m, sg_n, 1)

    def effective_sg(self) -> tuple[int, int, int]:
        return self.sg if self.sg is not None else self.builder_sg()

    def atom(self) -> DpasAtom:
        """The DPAS atom: explicit ``mma_atom``; else the builder's types with M = ``atom_m``, or
        gcd(8, WG_M) when the builder derives the layout (xe_mma_builder.inl:89), or gcd(8, per-SG M)."""
        if self.mma_atom:
            return parse_atom(self.mma_atom, "config")
        if self.atom_m is not None:
            return builder_atom(self.dtype, self.atom_m)
        sgm = self.effective_sg()[0]
        if self.sg is None:
            return builder_atom(self.dtype, math.gcd(8, self.wg[0]))
        return builder_atom(self.dtype, default_atom_m(max(1, self.wg[0] // max(1, sgm))))

    def per_sg(self) -> tuple[int, int, int]:
        sg = self.effective_sg()
        return (self.wg[0] // sg[0], self.wg[1] // sg[1], self.wg[2] // sg[2])

    def num_sg(self) -> int:
        sg = self.effective_sg()
        return sg[0] * sg[1] * sg[2]

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kernel": self.kernel,
            "dtype": self.dtype.as_json(),
            "wg": list(self.wg),
            "sg": list(self.effective_sg()),
            "stages": self.stages,
            "schedule": self.schedule,
            "atom_m": self.atom().m,
        }
        if self.mma_atom:
            out["mma_atom"] = self.mma_atom
        return out

    def label(self) -> str:
        sg = self.effective_sg()
        parts = [f"{self.wg[0]}x{self.wg[1]}x{self.wg[2]}", f"sg{sg[0]}x{sg[1]}x{sg[2]}", f"s{self.stages}"]
        if self.schedule != "default":
            parts.append(self.schedule)
        return "_".join(parts)


class XeFaConfig(TileConfig):
    """A sycl-tla flash-attention-v2 forward configuration (new API, applications/flash_attention_v2)."""

    kernel: str = "fa_prefill"
    dtype: DTypePair
    qk: tuple[int, int, int]
    pv: tuple[int, int, int]
    out: tuple[int, ...]  # (Q, V) for the new API; the legacy API's ShapeOutput is (Q, V, K)
    sg_qk: tuple[int, int, int]
    sg_pv: tuple[int, int, int] | None = None
    head_dim: int | None = None
    stages: int
    causal: bool = False
    persistent: bool = False
    api: str = "new"

    def effective_sg_pv(self) -> tuple[int, int, int]:
        """Default PV layout: get_sg_layout_pv(QK) = (SG_Q, 1, SG_K) (xe_fmha_fwd_mainloop.hpp:511-520)."""
        return self.sg_pv if self.sg_pv is not None else (self.sg_qk[0], 1, self.sg_qk[1])

    def atom(self) -> DpasAtom:
        """XE_DPAS_TT<gcd(SGTileQ, 8), float, ElementQ> (half_t for fp8), xe_fmha_fwd_runner.hpp:883-889."""
        sg_tile_q = max(1, self.qk[0] // self.sg_qk[0])
        a = self.dtype.a if self.dtype.a in FLOAT16 else "f16"
        return DpasAtom(m=math.gcd(sg_tile_q, 8), k=16, type_a=a, type_b=a)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kernel": self.kernel,
            "dtype": self.dtype.as_json(),
            "qk": list(self.qk),
            "pv": list(self.pv),
            "out": list(self.out),
            "sg_qk": list(self.sg_qk),
            "sg_pv": list(self.effective_sg_pv()),
            "stages": self.stages,
            "causal": self.causal,
            "persistent": self.persistent,
        }
        if self.head_dim is not None:
            out["head_dim"] = self.head_dim
        if self.api != "new":
            out["api"] = self.api
            out.pop("sg_pv")
        return out

    def label(self) -> str:
        parts = [
            "qk" + "x".join(map(str, self.qk)),
            "pv" + "x".join(map(str, self.pv)),
            "o" + "x".join(map(str, self.out)),
            "sg" + "x".join(map(str, self.sg_qk)),
            f"s{self.stages}",
        ]
        if self.causal:
            parts.append("causal")
        if self.persistent:
            parts.append("persistent")
        if self.api != "new":
            parts.append(self.api)
        return "_".join(parts)


def default_stages(kernel: str) -> int:
    """Library defaults: builder 3 (GEMM) / 2 (grouped) (xe_mma_builder.inl:107-110); MoE hard-codes a
    prefetch distance of 3 (examples/12_xe20_moe_gemm_cute_interface/moe_gemms.hpp:127); FA prefill 2,
    decode 1 (examples/06_bmg_flash_attention/06_xe_fmha_fwd.cpp:154-158)."""
    return {"gemm": 3, "grouped_gemm": 2, "moe_gemm": 3, "fa_prefill": 2, "fa_decode": 1}[kernel]
