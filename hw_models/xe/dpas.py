"""Intel Xe DPAS (XMX) atoms as sycl-tla models them, and the CollectiveBuilder's choices.

Sources (intel/sycl-tla at commit 6601377d25d3bb7cb2be0df6faf48f732a20a3e8; the sycl-tla 0.9.1 wheel
ships byte-identical copies of these headers):

- ``include/cute/arch/mma_xe.hpp:44-61``: ``XE_DPAS_TT<M, TypeD, TypeA, TypeB=TypeA, TypeC=TypeD>``,
  K = 256 / max(bits(A), bits(B)) (8 lanes x 32 bits), M is the repeat count;
  ``media/docs/cpp/xe_rearchitecture.md:51`` "Hardware allows any M with 1 <= M <= 8".
- ``include/cute/atom/mma_traits_xe.hpp:80``: N = 16.
- ``mma_xe.hpp:135-169``: declared (D, A, B, C) combinations: f/tf32/tf32/f; bf16 and f16 with f or
  16-bit D/C; integer {u8,s8,u4,s4} x {u8,s8,u4,s4} -> s32 (and u32 for unsigned).  No fp8, fp4 or
  f32 DPAS: those inputs are upconverted in registers (``reorder``).
- ``include/cutlass/gemm/collective/builders/xe_mma_builder.inl:44-53`` ``xe_dpas_tt_op_selector``:
  use ``XE_DPAS_TT<M, TC, TA, TB>`` if declared, else the bf16 atom when A is bf16, else the f16 atom.
- Legacy atoms ``XE_{8,4,2,1}x16x{16,32,8}_<D><A><B><C>_TT`` (``include/cute/arch/mma_xe_legacy.hpp``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kernelpilot.errors import InputError
from kernelpilot.hw_models.dtypes import DTYPE_BITS, INTEGER, DTypePair

INT_DPAS = frozenset({"s8", "u8", "s4", "u4"})


@dataclass(frozen=True)
class DpasAtom:
    """One XE_DPAS_TT instantiation: repeat count M, N=16, K, and the operand types it multiplies."""

    m: int
    k: int
    type_a: str
    type_b: str
    legacy: bool = False

    @property
    def n(self) -> int:
        return 16

    def describe(self) -> str:
        return f"XE_DPAS_TT<{self.m}, {'s32' if self.type_a in INT_DPAS else 'float'}, {self.type_a}, {self.type_b}>"


def accumulator_for(pair: DTypePair) -> str:
    """The accumulator we instantiate: s32 for integer x integer, f32 otherwise (generator convention,
    python/cutlass_library/generator.py GenerateXe_TensorOp_int8_DPAS_gemm: "[int8, int8, int32]")."""
    return "s32" if pair.a in INTEGER and pair.b in INTEGER else "f32"


def builder_mma_types(pair: DTypePair) -> tuple[str, str]:
    """Operand types of the DPAS the CollectiveBuilder selects (xe_mma_builder.inl:44-53)."""
    a, b = pair.a, pair.b
    if a == b == "tf32":
        return "tf32", "tf32"  # f/tf32/tf32/f is declared
    if a == b and a in ("bf16", "f16"):
        return a, b
    if a in INT_DPAS and b in INT_DPAS:
        return a, b  # s32 accumulator combos are all declared
    if a == "bf16":
        return "bf16", "bf16"
    return "f16", "f16"  # "Use f16 by default as upconversion sequences are typically faster"


def builder_atom(pair: DTypePair, m: int) -> DpasAtom:
    ta, tb = builder_mma_types(pair)
    k = 256 // max(DTYPE_BITS[ta], DTYPE_BITS[tb])
    return DpasAtom(m=m, k=k, type_a=ta, type_b=tb)


_LEGACY_TYPES = {
    "F32": "f32",
    "BF16": "bf16",
    "F16": "f16",
    "S32": "s32",
    "S8": "s8",
    "U8": "u8",
    "TF32": "tf32",
}
_LEGACY_RE = re.compile(
    r"^XE_(\d+)x16x(\d+)_(F32|BF16|F16|S32)(BF16|F16|S8|U8|TF32)(BF16|F16|S8|U8|TF32)(F32|BF16|F16|S32)_TT$"
)
_NEW_RE = re.compile(r"^XE_DPAS_TT<\s*(\d+)\s*,\s*(\w+)\s*,\s*(\w+)\s*(?:,\s*(\w+)\s*)?(?:,\s*(\w+)\s*)?>$")
_CPP_TYPES = {
    "float": "f32",
    "f32": "f32",
    "tfloat32_t": "tf32",
    "tf32": "tf32",
    "bfloat16_t": "bf16",
    "bf16": "bf16",
    "half_t": "f16",
    "half": "f16",
    "f16": "f16",
    "int8_t": "s8",
    "s8": "s8",
    "uint8_t": "u8",
    "u8": "u8",
    "int4_t": "s4",
    "s4": "s4",
    "uint4_t": "u4",
    "u4": "u4",
    "int32_t": "s32",
    "s32": "s32",
    "uint32_t": "u32",
    "float_e4m3_t": "e4m3",
    "e4m3": "e4m3",
    "float_e5m2_t": "e5m2",
    "e5m2": "e5m2",
    "float_e2m1_t": "e2m1",
}
#: (A, B) combinations XE_DPAS_TT declares (mma_xe.hpp:135-169)
DECLARED_AB = {("tf32", "tf32"), ("bf16", "bf16"), ("f16", "f16")} | {
    (a, b) for a in INT_DPAS for b in INT_DPAS
}
#: legacy atoms exist only for these (mma_xe_legacy.hpp:53-641)
LEGACY_AB = {("bf16", "bf16"), ("f16", "f16"), ("s8", "s8"), ("u8", "u8"), ("tf32", "tf32")}


def parse_atom(text: str, where: str) -> DpasAtom:
    """Parse ``XE_DPAS_TT<8, float, bfloat16_t>`` or a legacy name ``XE_8x16x16_F32BF16BF16F32_TT``.

    The declared shape is taken from the name; whether the combination exists is a *rule*
    (``xe.atom_types``), not an input error, so the checker can say why.
    """
    text = text.strip().replace("cute::", "").replace("cutlass::", "")
    legacy = _LEGACY_RE.match(text)
    if legacy:
        m, k, _d, ta, tb, _c = legacy.groups()
        return DpasAtom(m=int(m), k=int(k), type_a=_LEGACY_TYPES[ta], type_b=_LEGACY_TYPES[tb], legacy=True)
    new = _NEW_RE.match(text)
    if new:
        m, _d, ta, tb, _c = new.groups()
        try:
            a = _CPP_TYPES[ta]
            b = _CPP_TYPES[tb] if tb else a
        except KeyError as exc:
            raise InputError(
                f"{where}: mma_atom {text!r}: unknown element type {exc.args[0]!r}", field="mma_atom"
            ) from exc
        k = 256 // max(DTYPE_BITS.get(a, 32), DTYPE_BITS.get(b, 32))
        return DpasAtom(m=int(m), k=k, type_a=a, type_b=b)
    raise InputError(
        f"{where}: mma_atom {text!r} is neither XE_DPAS_TT<M, TD, TA[, TB]> nor a legacy XE_<M>x16x<K>_<D><A><B><C>_TT name",
        field="mma_atom",
    )


def default_atom_m(per_sg_m: int) -> int:
    """M repeat count the examples use: gcd(8, per-subgroup M) (xe_fmha_fwd_runner.hpp:883-889 for FA;
    the GEMM examples use 8 with per-SG M a multiple of 8)."""
    return math.gcd(8, per_sg_m)
