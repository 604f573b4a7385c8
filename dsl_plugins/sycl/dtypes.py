"""Element types of the sycl-tla programs: C++ spelling, DPAS atom choice, fill values, tolerances.

Why here and not in the templates: the DPAS operation must be chosen exactly as sycl-tla's
CollectiveBuilder does (``include/cutlass/gemm/collective/builders/xe_mma_builder.inl:44-53``): use
``XE_DPAS_TT<M, Acc, A, B>`` when that combination is declared in ``include/cute/arch/mma_xe.hpp``,
otherwise upconvert in registers and use the bf16 (A is bf16) or f16 DPAS.  Doing it in Python lets the
tests check the rule for every dtype pair the Xe model accepts.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelpilot.errors import InputError
from kernelpilot.hw_models.dtypes import DTypePair, parse_dtype

CPP_TYPES = {
    "bf16": "cutlass::bfloat16_t",
    "f16": "cutlass::half_t",
    "tf32": "cutlass::tfloat32_t",
    "f32": "float",
    "e4m3": "cutlass::float_e4m3_t",
    "e5m2": "cutlass::float_e5m2_t",
    "s8": "int8_t",
    "u8": "uint8_t",
    "s32": "int32_t",
    "s4": "cutlass::int4b_t",
    "u4": "cutlass::uint4b_t",
    "e2m1": "cutlass::float_e2m1_t",
}
INTEGER_INPUTS = {"s8", "u8", "s4", "u4"}

# (D, A, B, C) combinations declared with CUTE_DECLARE_XE_DPAS_TT in include/cute/arch/mma_xe.hpp:135-169
# (f = float accumulate, s32 = int32 accumulate); only those with C == D matter for GEMM accumulation.
_DPAS_DECLARED = {
    ("f32", "tf32", "tf32"),
    ("f32", "bf16", "bf16"),
    ("f32", "f16", "f16"),
    # every {u8, s8, u4, s4} x {u8, s8, u4, s4} with int32 D and C (mma_xe.hpp:148-169)
    *{("s32", a, b) for a in ("u8", "s8", "u4", "s4") for b in ("u8", "s8", "u4", "s4")},
}


def accumulator(pair: DTypePair) -> str:
    """int32 accumulation for integer x integer, fp32 otherwise (the only two Xe DPAS accumulators)."""
    return "s32" if pair.a in INTEGER_INPUTS and pair.b in INTEGER_INPUTS else "f32"


def dpas_op(atom_m: int, pair: DTypePair) -> str:
    """``XE_DPAS_TT<M, Acc, A, B>`` exactly as ``xe_dpas_tt_op_selector`` picks it."""
    acc = accumulator(pair)
    if (acc, pair.a, pair.b) in _DPAS_DECLARED:
        if pair.a == pair.b:
            return f"XE_DPAS_TT<{atom_m}, {CPP_TYPES[acc]}, {CPP_TYPES[pair.a]}>"
        return f"XE_DPAS_TT<{atom_m}, {CPP_TYPES[acc]}, {CPP_TYPES[pair.a]}, {CPP_TYPES[pair.b]}>"
    if pair.a == "bf16":
        return f"XE_DPAS_TT<{atom_m}, float, cutlass::bfloat16_t>"
    return f"XE_DPAS_TT<{atom_m}, float, cutlass::half_t>"


@dataclass(frozen=True)
class Fill:
    """Values v * scale with v in [-range, -1] U [1, range]: exact in every Xe input type."""

    range: int
    scale: float


def fill_for(dtype: str) -> Fill:
    """(4-bit types are filled from a table of small non-zero codes in the program, not from this.)"""
    if dtype in INTEGER_INPUTS:
        return Fill(8, 1.0)
    return Fill(8, 0.25)


def output_dtype(pair: DTypePair, requested: str | None, where: str) -> str:
    """Output element: s32 for integer GEMMs; f32 (sycl-tla's example default), bf16 or f16 otherwise."""
    if accumulator(pair) == "s32":
        if requested not in (None, "s32", "int32"):
            raise InputError(
                f"{where}: out_dtype {requested!r}: integer GEMMs write s32", field="dims.out_dtype"
            )
        return "s32"
    if requested is None:
        return "f32"
    name = {"fp32": "f32", "float": "f32", "fp16": "f16", "bfloat16": "bf16", "half": "f16"}.get(
        requested, requested
    )
    if name not in ("f32", "bf16", "f16"):
        raise InputError(f"{where}: out_dtype {requested!r} not in f32, bf16, f16", field="dims.out_dtype")
    return name


def tolerance(out: str) -> tuple[float, float]:
    """(rtol, atol) of the comparison with the reference.  Inputs are small integers times a power of two,
    so fp32 sums are exact in both kernel and reference; what remains is output rounding."""
    return {"f32": (1e-3, 1e-3), "s32": (0.0, 0.0), "f16": (2e-3, 2e-3), "bf16": (1e-2, 1e-2)}[out]


def parse_pair(dtype: object, where: str) -> DTypePair:
    return parse_dtype(dtype, where)
