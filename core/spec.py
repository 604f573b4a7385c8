"""Spec YAML: what a kernel's inputs are, how its ``Model`` is built, and which sizes to run.

Users already write this format (KernelBench / Xe-Forge style)::

    inputs:
      X:        {shape: [BATCH, IN], dtype: float32}
      topk_ids: {shape: [M, TOPK], dtype: int32, range: [0, E]}   # integer input, values in [0, E)
    inits:
      - dim: IN            # positional Model(...) arguments, resolved from the variant's dims
      - dim: 1.5           # or a literal
    ci:                    # a variant: a list of entries (``ci``, ``bench-gpu``, ``bench-gpu-3``, ...)
      - params: [X]
        dtype: float16     # overrides the dtype of floating-point inputs
        dims: {BATCH: 4, IN: 1024}
        flop: "2*BATCH*IN"  # formula over dims, evaluated with a restricted AST walker
        rtol: 1e-2         # optional
    default_variant: ci    # optional

Differences from Xe-Forge, on purpose: formulas are evaluated over the AST (a dimension named ``N``
never corrupts ``NUM_HEADS``), integer inputs carry value ranges, every entry of a variant list is
reachable (``bench-gpu#1``), and every error names the file, the variant and the field.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kernelpilot.errors import InputError, validation_lines

# Canonical dtype names (torch attribute names) and the aliases users write.
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "bool")
DTYPES = FLOAT_DTYPES + INT_DTYPES
DTYPE_ALIASES = {
    "fp16": "float16",
    "f16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
    "fp32": "float32",
    "f32": "float32",
    "float": "float32",
    "fp64": "float64",
    "f64": "float64",
    "double": "float64",
    "fp8_e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "long": "int64",
    "int": "int32",
}
RESERVED_KEYS = ("inputs", "inits", "default_variant")
VARIANT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
DIM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DEFAULT_VARIANT = "bench-gpu"


def canonical_dtype(value: str) -> str:
    """Map a user's dtype spelling onto a torch dtype name; unknown names raise ``ValueError``."""
    name = str(value).strip().lower().removeprefix("torch.")
    name = DTYPE_ALIASES.get(name, name)
    if name not in DTYPES:
        raise ValueError(
            f"unknown dtype {value!r}; allowed: {', '.join(DTYPES)} (or aliases {', '.join(DTYPE_ALIASES)})"
        )
    return name


# --------------------------------------------------------------------------------------------------
# Safe formula evaluation
# --------------------------------------------------------------------------------------------------

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_MAX_BITS = 256  # no dimension, FLOP or byte count comes near 2**256; a formula past it is a mistake
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_FUNCS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "ceil": math.ceil,
    "floor": math.floor,
    "sqrt": math.sqrt,
    "log2": math.log2,
    "log": math.log,
    "exp": math.exp,
    "cdiv": lambda a, b: -(-a // b),
}


def formula_names(expr: str) -> set[str]:
    """Dimension names a formula refers to (function names excluded)."""
    tree = ast.parse(str(expr), mode="eval")
    calls = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in calls}


def evaluate_formula(expr: str | int | float, dims: Mapping[str, int | float]) -> float:
    """Evaluate ``expr`` (e.g. ``"2*M*N*K"``) with the dims as variables, through the AST only.

    Allowed: numbers, dimension names, ``+ - * / // % **``, unary minus, and the functions
    ``min max abs ceil floor sqrt log2 log exp cdiv``.  Anything else (attributes, subscripts,
    unknown names, keyword arguments) raises ``ValueError`` naming what is not allowed; nothing is
    ever passed to ``eval``.
    """
    if isinstance(expr, bool):
        raise ValueError("a formula must be a number or an expression string, not a boolean")
    if isinstance(expr, (int, float)):
        return float(expr)
    try:
        tree = ast.parse(str(expr).strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"formula {expr!r} is not a valid expression: {exc.msg}") from None

    def bounded(value: Any) -> Any:
        # every intermediate stays finite and below 2**_MAX_BITS, so no formula can hang or overflow
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"formula {expr!r}: a step evaluates to {value}")
        if abs(value) > 2**_MAX_BITS:
            raise ValueError(f"formula {expr!r}: a step exceeds 2**{_MAX_BITS}")
        return value

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool)
        ):
            return bounded(node.value)
        if isinstance(node, ast.Name):
            if node.id not in dims:
                raise ValueError(
                    f"formula {expr!r} uses unknown dimension {node.id!r}; known: {', '.join(sorted(dims))}"
                )
            value = dims[node.id]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"formula {expr!r}: dimension {node.id!r} is {value!r}, not a number")
            return bounded(value)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and (
                abs(right) > 64 or (abs(left) > 1 and right * math.log2(abs(left)) > _MAX_BITS)
            ):
                raise ValueError(f"formula {expr!r}: {left} ** {right} is too large")
            try:
                return bounded(_BINOPS[type(node.op)](left, right))
            except ZeroDivisionError:
                raise ValueError(f"formula {expr!r} divides by zero") from None
            except (OverflowError, TypeError) as exc:
                raise ValueError(f"formula {expr!r}: {exc}") from None
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](walk(node.operand))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
            if node.keywords:
                raise ValueError(f"formula {expr!r}: keyword arguments are not allowed")
            args = [walk(a) for a in node.args]
            try:
                return bounded(_FUNCS[node.func.id](*args))
            except (ArithmeticError, TypeError, ValueError) as exc:
                raise ValueError(
                    f"formula {expr!r}: {node.func.id}({', '.join(map(str, args))}) failed: {exc}"
                ) from None
        raise ValueError(
            f"formula {expr!r}: {type(node).__name__} is not allowed (numbers, dimension names, "
            f"+ - * / // % **, and {', '.join(_FUNCS)} only)"
        )

    result = walk(tree)
    return float(result)


# --------------------------------------------------------------------------------------------------
# pydantic models of the YAML
# --------------------------------------------------------------------------------------------------

DimRef = str | int | float


class InputSpec(BaseModel):
    """One tensor argument of ``forward``: a shape over dimension names and a dtype."""

    model_config = ConfigDict(extra="forbid")

    shape: list[DimRef] = Field(default_factory=list)
    dtype: str = "float32"
    range: tuple[DimRef, DimRef] | None = None  # [low, high) for integer inputs

    @field_validator("dtype", mode="before")
    @classmethod
    def _dtype(cls, value: Any) -> str:
        return canonical_dtype(value)

    @field_validator("shape", mode="before")
    @classmethod
    def _shape(cls, value: Any) -> Any:
        if isinstance(value, (str, int)):
            return [value]
        return value

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES


class VariantEntry(BaseModel):
    """One entry of a variant list: which inputs, which sizes, the FLOP formula and tolerances."""

    model_config = ConfigDict(extra="forbid")

    params: list[str] | None = None
    dtype: str | None = None
    dims: dict[str, int | float] = Field(default_factory=dict)
    flop: str | int | float | None = None
    bytes: str | int | float | None = None  # optional: bytes moved, for arithmetic intensity
    rtol: float | None = Field(None, ge=0.0)
    atol: float | None = Field(None, ge=0.0)

    @field_validator("dtype", mode="before")
    @classmethod
    def _dtype(cls, value: Any) -> Any:
        return None if value is None else canonical_dtype(value)

    @field_validator("dims")
    @classmethod
    def _dims(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name, dim in value.items():
            if not DIM_NAME.match(str(name)):
                raise ValueError(f"dimension name {name!r} is not an identifier")
            if isinstance(dim, float) and not math.isfinite(dim):
                raise ValueError(f"dimension {name} = {dim} is not a finite number")
        return value


@dataclass(frozen=True)
class ResolvedInput:
    """An input with concrete sizes for one variant."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    range: tuple[int | float, int | float] | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape) if self.shape else 1


@dataclass(frozen=True)
class ResolvedVariant:
    """Everything an executor needs to build inputs and a ``Model`` for one variant entry."""

    name: str
    index: int
    dims: dict[str, int | float]
    inputs: tuple[ResolvedInput, ...]
    init_args: tuple[Any, ...]
    dtype: str | None
    flop: float | None
    bytes: float | None
    rtol: float | None
    atol: float | None
    source: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "index": self.index,
            "dims": dict(self.dims),
            "inputs": [
                {
                    "name": i.name,
                    "shape": list(i.shape),
                    "dtype": i.dtype,
                    "range": list(i.range) if i.range else None,
                }
                for i in self.inputs
            ],
            "init_args": list(self.init_args),
            "dtype": self.dtype,
            "flop": self.flop,
            "bytes": self.bytes,
            "rtol": self.rtol,
            "atol": self.atol,
        }


@dataclass
class KernelSpec:
    """A parsed spec file.  ``variants`` maps a variant name to its list of entries."""

    inputs: dict[str, InputSpec]
    inits: list[dict[str, Any]]
    variants: dict[str, list[VariantEntry]]
    default_variant: str | None = None
    path: str | None = None
    extra: dict[str, Any] = field(
        default_factory=dict
    )  # non-variant sections (e.g. ``lowering``), kept, unused

    # ------------------------------------------------------------------
    def _where(self) -> str | None:
        return self.path

    def choose_variant(self, requested: str | None = None) -> str:
        """CLI choice > ``default_variant`` > ``bench-gpu`` (if present) > the only variant."""
        name = requested or self.default_variant
        if name is None:
            if DEFAULT_VARIANT in self.variants:
                name = DEFAULT_VARIANT
            elif len(self.variants) == 1:
                name = next(iter(self.variants))
            else:
                raise InputError(
                    f"no variant requested and no default_variant; choose one of: {', '.join(self.variants)}",
                    file=self.path,
                    field="variant",
                )
        return name

    def entry(self, variant: str) -> tuple[str, int, VariantEntry]:
        """Look up ``name`` or ``name#index`` (index into the variant's list, default 0)."""
        name, _, index_text = variant.partition("#")
        if name not in self.variants:
            raise InputError(
                f"unknown variant {name!r}; this spec has: {', '.join(self.variants)}",
                file=self.path,
                field="variant",
            )
        entries = self.variants[name]
        try:
            index = int(index_text) if index_text else 0
        except ValueError:
            raise InputError(
                f"variant index {index_text!r} is not an integer", file=self.path, field="variant"
            ) from None
        if not 0 <= index < len(entries):
            raise InputError(
                f"variant {name!r} has {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}; index {index} is out of range",
                file=self.path,
                field="variant",
            )
        return name, index, entries[index]

    def resolve(self, variant: str | None = None) -> ResolvedVariant:
        """Concrete shapes, dtypes, init args, FLOPs and tolerances for one variant entry."""
        name, index, entry = self.entry(self.choose_variant(variant))
        where = f"{name}[{index}]" if len(self.variants[name]) > 1 else name
        dims = dict(entry.dims)

        def dim_value(ref: DimRef, fld: str) -> int | float:
            if isinstance(ref, bool):
                raise InputError(f"{ref!r} is not a dimension", file=self.path, field=fld)
            if isinstance(ref, float) and not math.isfinite(ref):
                raise InputError(f"{ref} is not a finite number", file=self.path, field=fld)
            if isinstance(ref, (int, float)):
                return ref
            if ref in dims:
                return dims[ref]
            try:
                return evaluate_formula(ref, dims)
            except ValueError as exc:
                raise InputError(
                    f"{exc}; variant {where!r} defines dims: {', '.join(dims) or '(none)'}",
                    file=self.path,
                    field=fld,
                ) from None

        param_names = entry.params if entry.params is not None else list(self.inputs)
        resolved_inputs = []
        for pname in param_names:
            if pname not in self.inputs:
                raise InputError(
                    f"variant {where!r} lists param {pname!r} that is not under inputs ({', '.join(self.inputs)})",
                    file=self.path,
                    field=f"{where}.params",
                )
            spec = self.inputs[pname]
            shape = []
            for i, ref in enumerate(spec.shape):
                value = dim_value(ref, f"inputs.{pname}.shape[{i}] (variant {where})")
                if float(value) != int(value) or int(value) < 0:
                    raise InputError(
                        f"dimension {ref!r} = {value!r} is not a non-negative integer",
                        file=self.path,
                        field=f"inputs.{pname}.shape[{i}] (variant {where})",
                    )
                shape.append(int(value))
            dtype = entry.dtype if (entry.dtype and spec.is_float) else spec.dtype
            rng = None
            if spec.range is not None:
                lo = dim_value(spec.range[0], f"inputs.{pname}.range[0] (variant {where})")
                hi = dim_value(spec.range[1], f"inputs.{pname}.range[1] (variant {where})")
                if not hi > lo:
                    raise InputError(
                        f"range [{lo}, {hi}) is empty",
                        file=self.path,
                        field=f"inputs.{pname}.range (variant {where})",
                    )
                rng = (lo, hi)
            resolved_inputs.append(ResolvedInput(pname, tuple(shape), dtype, rng))

        init_args: list[Any] = []  # dimension values or literal constants, in Model(*init_args) order
        for i, item in enumerate(self.inits):
            (key, ref), *_ = item.items()
            if isinstance(ref, str) and DIM_NAME.match(ref):
                if ref not in dims:
                    raise InputError(
                        f"init {key}: {ref!r} is not a dimension of variant {where!r} (dims: {', '.join(dims) or '(none)'})",
                        file=self.path,
                        field=f"inits[{i}]",
                    )
                init_args.append(dims[ref])
            else:
                init_args.append(ref)

        def formula(value: Any, fld: str) -> float | None:
            if value is None:
                return None
            try:
                return evaluate_formula(value, dims)
            except ValueError as exc:
                raise InputError(str(exc), file=self.path, field=f"{where}.{fld}") from None

        return ResolvedVariant(
            name=name,
            index=index,
            dims=dims,
            inputs=tuple(resolved_inputs),
            init_args=tuple(init_args),
            dtype=entry.dtype,
            flop=formula(entry.flop, "flop"),
            bytes=formula(entry.bytes, "bytes"),
            rtol=entry.rtol,
            atol=entry.atol,
            source=self.path or "",
        )

    def variant(self, name: str | None = None) -> ResolvedVariant:
        """Alias of :meth:`resolve` (the name the pipeline codes against)."""
        return self.resolve(name)

    def default_variant_name(self) -> str:
        """The variant used when none is requested (``default_variant`` > ``bench-gpu`` > the only one)."""
        return self.choose_variant(None)

    def tolerance_settings(self, variant: str | None = None) -> dict[str, float]:
        """The variant's rtol/atol as settings names, for ``load_settings(spec=...)`` (absent ones left out)."""
        v = self.resolve(variant)
        out: dict[str, float] = {}
        if v.rtol is not None:
            out["correctness_rtol"] = v.rtol
        if v.atol is not None:
            out["correctness_atol"] = v.atol
        return out

    def to_yaml_dict(self) -> dict[str, Any]:
        """Round-trippable plain data (used to hand the spec to worker processes)."""
        data: dict[str, Any] = {
            "inputs": {k: v.model_dump(exclude_none=True) for k, v in self.inputs.items()},
            "inits": [dict(i) for i in self.inits],
        }
        for name, entries in self.variants.items():
            data[name] = [e.model_dump(exclude_none=True) for e in entries]
        if self.default_variant:
            data["default_variant"] = self.default_variant
        return data


def _loc(err: Mapping[str, Any]) -> str:
    return ".".join(str(p) for p in err.get("loc", ()))


def parse_spec(data: Any, *, path: str | None = None) -> KernelSpec:
    """Validate already-loaded YAML data; every problem is an :class:`InputError` with file and field."""
    if not isinstance(data, Mapping):
        raise InputError("a spec must be a mapping with inputs, inits and variants", file=path)
    # ``inputs`` may be left out when the kernel file defines ``get_example_inputs()`` (the executor
    # checks that); when present it must be a mapping.
    raw_inputs = data.get("inputs") or {}
    if not isinstance(raw_inputs, Mapping):
        raise InputError("'inputs' must be a mapping of name -> {shape, dtype}", file=path, field="inputs")
    inputs: dict[str, InputSpec] = {}
    for name, value in raw_inputs.items():
        if not isinstance(value, Mapping):
            raise InputError("must be a mapping with shape and dtype", file=path, field=f"inputs.{name}")
        try:
            inputs[str(name)] = InputSpec.model_validate(dict(value))
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InputError(
                "; ".join(validation_lines(exc)), file=path, field=f"inputs.{name}.{_loc(err)}".rstrip(".")
            ) from None
        if inputs[str(name)].range is not None and inputs[str(name)].is_float:
            raise InputError(
                "range is only for integer inputs (float inputs are drawn from a normal distribution)",
                file=path,
                field=f"inputs.{name}.range",
            )

    raw_inits = data.get("inits", []) or []
    if not isinstance(raw_inits, list):
        raise InputError(
            "'inits' must be a list of single-key mappings like '- dim: N'", file=path, field="inits"
        )
    inits = []
    for i, item in enumerate(raw_inits):
        if not isinstance(item, Mapping) or len(item) != 1:
            raise InputError(
                f"each init must be a single-key mapping like '- dim: N', got {item!r}",
                file=path,
                field=f"inits[{i}]",
            )
        inits.append(dict(item))

    default_variant = data.get("default_variant")
    if default_variant is not None and not isinstance(default_variant, str):
        raise InputError("must be a variant name", file=path, field="default_variant")

    variants: dict[str, list[VariantEntry]] = {}
    extra: dict[str, Any] = {}
    for key, value in data.items():
        if key in RESERVED_KEYS:
            continue
        key = str(key)
        if not isinstance(value, list):
            # Sections other tools keep in the same file (e.g. Xe-Forge's ``lowering``) are kept
            # aside; a scalar at the top level is a typo we report.
            if isinstance(value, Mapping):
                extra[key] = value
                continue
            raise InputError(
                f"top-level key {key!r} is neither a variant (a list of entries) nor one of {', '.join(RESERVED_KEYS)}",
                file=path,
                field=key,
            )
        if not VARIANT_NAME.match(key):
            raise InputError("variant names use letters, digits, '_', '-', '.'", file=path, field=key)
        if not value:
            raise InputError("a variant needs at least one entry", file=path, field=key)
        entries = []
        for i, entry in enumerate(value):
            if not isinstance(entry, Mapping):
                raise InputError(
                    "a variant entry must be a mapping (params, dtype, dims, flop)",
                    file=path,
                    field=f"{key}[{i}]",
                )
            try:
                entries.append(VariantEntry.model_validate(dict(entry)))
            except ValidationError as exc:
                err = exc.errors()[0]
                allowed = ", ".join(VariantEntry.model_fields)
                raise InputError(
                    f"{'; '.join(validation_lines(exc))} (allowed fields: {allowed})",
                    file=path,
                    field=f"{key}[{i}].{_loc(err)}",
                ) from None
        variants[key] = entries
    if not variants:
        raise InputError("no variants (e.g. 'ci:' or 'bench-gpu:' lists) found", file=path)
    if default_variant is not None and default_variant not in variants:
        raise InputError(
            f"{default_variant!r} is not a variant of this spec ({', '.join(variants)})",
            file=path,
            field="default_variant",
        )
    spec = KernelSpec(
        inputs=inputs, inits=inits, variants=variants, default_variant=default_variant, path=path, extra=extra
    )
    # Resolve every entry once so a bad dimension reference fails at load time, not mid-run.
    for name, entries in variants.items():
        for i in range(len(entries)):
            spec.resolve(f"{name}#{i}")
    return spec


def load_spec(path: str | Path) -> KernelSpec:
    """Read and validate a spec YAML file."""
    from kernelpilot.fileio import read_text

    p = Path(path)
    text = read_text(p, field="--spec", what="spec file")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML: {exc}", file=str(p)) from None
    return parse_spec(data, path=str(p))
