"""Element types as the tile models name them, and their parsing.

Users write dtypes in config files and on the command line; the model needs the bit width (DPAS and
WGMMA K depend on it) and the pair (A, B) for mixed-input GEMMs.  One canonical spelling per type
keeps configuration hashes stable: ``fp16`` is accepted and stored as ``f16``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from kernelpilot.errors import InputError

#: canonical name -> bits.  ``tf32`` is stored in 32 bits but multiplies with a 19-bit mantissa path;
#: for tiling purposes (DPAS K, WGMMA K, bytes moved) it counts as 32 bits.
DTYPE_BITS: dict[str, int] = {
    "f32": 32,
    "tf32": 32,
    "bf16": 16,
    "f16": 16,
    "e4m3": 8,
    "e5m2": 8,
    "s8": 8,
    "u8": 8,
    "e2m1": 4,
    "s4": 4,
    "u4": 4,
}
ALIASES: dict[str, str] = {
    "fp16": "f16",
    "half": "f16",
    "float16": "f16",
    "bfloat16": "bf16",
    "fp32": "f32",
    "float32": "f32",
    "float": "f32",
    "int8": "s8",
    "uint8": "u8",
    "int4": "s4",
    "uint4": "u4",
    "fp8_e4m3": "e4m3",
    "fp8_e5m2": "e5m2",
    "fp4": "e2m1",
}
FLOAT8 = frozenset({"e4m3", "e5m2"})
INTEGER = frozenset({"s8", "u8", "s4", "u4"})
FLOAT16 = frozenset({"bf16", "f16"})


def canonical_dtype(name: Any, where: str = "", field: str = "dtype") -> str:
    """Return the canonical spelling of one element type or raise ``InputError`` listing the names."""
    if not isinstance(name, str):
        raise InputError(
            f"{where}: {field} must be a string, got {name!r}; allowed: {', '.join(DTYPE_BITS)}", field=field
        )
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in DTYPE_BITS:
        raise InputError(
            f"{where}: unknown {field} {name!r}; allowed: {', '.join(DTYPE_BITS)} (fp16 is accepted for f16)",
            field=field,
        )
    return key


class DTypePair(BaseModel):
    """Element types of the A and B operands (equal for ordinary GEMMs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    a: str
    b: str

    @property
    def same(self) -> bool:
        return self.a == self.b

    @property
    def bits_a(self) -> int:
        return DTYPE_BITS[self.a]

    @property
    def bits_b(self) -> int:
        return DTYPE_BITS[self.b]

    @property
    def max_bits(self) -> int:
        return max(self.bits_a, self.bits_b)

    def as_json(self) -> str | dict[str, str]:
        """The canonical JSON form: a plain string when A and B agree, else ``{a, b}``."""
        return self.a if self.same else {"a": self.a, "b": self.b}

    def label(self) -> str:
        return self.a if self.same else f"{self.a}x{self.b}"


def parse_dtype(raw: Any, where: str = "", field: str = "dtype") -> DTypePair:
    """Parse ``"bf16"`` or ``{a: bf16, b: s8}`` (or an existing :class:`DTypePair`)."""
    if isinstance(raw, DTypePair):
        return raw
    if isinstance(raw, dict):
        unknown = sorted(set(raw) - {"a", "b"})
        if unknown or set(raw) != {"a", "b"}:
            raise InputError(
                f"{where}: {field} as a mapping needs exactly the keys a and b, got {sorted(raw)}",
                field=field,
            )
        return DTypePair(
            a=canonical_dtype(raw["a"], where, f"{field}.a"), b=canonical_dtype(raw["b"], where, f"{field}.b")
        )
    name = canonical_dtype(raw, where, field)
    return DTypePair(a=name, b=name)
