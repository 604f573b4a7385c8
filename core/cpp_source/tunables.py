"""The spec's ``tunables:`` section: compile-time constants and launch configuration of a C++ kernel.

Shared by every C++ source DSL (CUDA, SYCL, ...: the kernels are C++; their autotuning stages search the same
way).  Spec extension::

    tunables:
      parameters:                 # name -> list of values, or {values: [...], role: ...}
        BLOCK_M: [32, 64, 128]
        THREADS: {values: [128, 256, 512], role: threads}   # threads (work-items) per block
      constraints:                # every expression must hold (dims of the variant are in scope)
        - "BLOCK_M * BLOCK_K % THREADS == 0"
        - "BLOCK_M <= M"
      max_configs: 12             # candidates per attempt of the autotuning stage (default 8)

In the kernel each parameter is a constant the stage can rewrite, either
``#define NAME value`` (usually inside ``#ifndef NAME`` ... ``#endif``) or
``constexpr <type> NAME = value;``.  The current values in the source are the stage's starting point.

Constraints are comparisons (``< <= > >= == !=``) joined with ``and``/``or``/``not`` over
arithmetic the spec's formula evaluator accepts; they are parsed with ``ast`` and never ``eval``-ed.
``role: threads`` adds the hardware rule ``thread_multiple <= value <= max_threads`` and
``value % thread_multiple == 0`` (defaults 32 and 1024: a warp and CUDA's block limit; on Xe use 16, a
sub-group, and the device's work-group limit).  Illegal configurations are dropped before anything
is compiled.
"""

from __future__ import annotations

import ast
import itertools
import random
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kernelpilot.errors import InputError
from kernelpilot.spec import evaluate_formula

ROLES = ("threads", "constant")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CMP = {
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
}


class Parameter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    values: list[int] = Field(min_length=1)
    role: str = "constant"

    @field_validator("role")
    @classmethod
    def _role(cls, value: str) -> str:
        if value not in ROLES:
            raise ValueError(f"unknown role {value!r}; allowed: {', '.join(ROLES)}")
        return value


class TunablesModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    parameters: dict[str, Parameter] = Field(min_length=1)
    constraints: list[str] = Field(default_factory=list)
    max_configs: int = Field(8, ge=1, le=1000)
    max_threads: int = Field(1024, ge=1)
    thread_multiple: int = Field(32, ge=1)  # a warp on NVIDIA; 16 (a sub-group) is typical on Xe

    @field_validator("parameters", mode="before")
    @classmethod
    def _short_form(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        out = {}
        for name, spec in value.items():
            if not _NAME.match(str(name)):
                raise ValueError(f"parameter name {name!r} is not a C identifier")
            out[str(name)] = {"values": spec} if isinstance(spec, list) else spec
        return out


@dataclass
class Tunables:
    parameters: dict[str, Parameter]
    constraints: list[str]
    max_configs: int = 8
    max_threads: int = 1024
    thread_multiple: int = 32
    source: str | None = None  # spec path, for error messages
    problems: dict[tuple[tuple[str, int], ...], str] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return list(self.parameters)

    def size(self) -> int:
        n = 1
        for p in self.parameters.values():
            n *= len(p.values)
        return n

    def violations(self, config: dict[str, int], dims: dict[str, Any]) -> list[str]:
        """Why ``config`` is illegal (empty: legal)."""
        found = []
        for name, param in self.parameters.items():
            value = config[name]
            step = self.thread_multiple
            if param.role == "threads" and not (step <= value <= self.max_threads and value % step == 0):
                found.append(
                    f"{name}={value}: threads per block must be a multiple of {step} in [{step}, {self.max_threads}]"
                )
        scope = {**{k: v for k, v in dims.items()}, **config}
        for text in self.constraints:
            if not check_constraint(text, scope):
                found.append(f"constraint {text!r} does not hold")
        return found

    def legal_configs(self, dims: dict[str, Any]) -> list[dict[str, int]]:
        names = self.names
        legal = []
        for values in itertools.product(*(self.parameters[n].values for n in names)):
            config = dict(zip(names, values, strict=True))
            if not self.violations(config, dims):
                legal.append(config)
        return legal


def check_constraint(text: str, scope: dict[str, Any]) -> bool:
    """Evaluate a boolean constraint over ``scope`` with the AST only (see module docstring)."""
    try:
        tree = ast.parse(str(text).strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"constraint {text!r} is not a valid expression: {exc.msg}") from None

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.BoolOp):
            values = [walk(v) for v in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not walk(node.operand)
        if isinstance(node, ast.Compare):
            left = arith(node.left)
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                if type(op) not in _CMP:
                    raise ValueError(f"constraint {text!r}: operator {type(op).__name__} is not allowed")
                right = arith(right_node)
                if not _CMP[type(op)](left, right):
                    return False
                left = right
            return True
        raise ValueError(f"constraint {text!r} must be a comparison (e.g. 'BLOCK_M * BLOCK_K <= 8192')")

    def arith(node: ast.AST) -> float:
        return evaluate_formula(ast.unparse(node), scope)

    return bool(walk(tree))


def parse_tunables(data: Any, *, path: str | None = None, dims: dict[str, Any] | None = None) -> Tunables:
    """Validate the ``tunables:`` mapping; errors name the spec file and the field."""
    if not isinstance(data, dict):
        raise InputError("'tunables' must be a mapping with 'parameters'", file=path, field="tunables")
    try:
        model = TunablesModel.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        allowed = ", ".join(TunablesModel.model_fields)
        raise InputError(
            f"{err['msg']} (allowed fields: {allowed}; parameter fields: values, role)",
            file=path,
            field=f"tunables.{loc}".rstrip("."),
        ) from None
    tunables = Tunables(
        parameters=model.parameters,
        constraints=model.constraints,
        max_configs=model.max_configs,
        max_threads=model.max_threads,
        thread_multiple=model.thread_multiple,
        source=path,
    )
    probe = {n: p.values[0] for n, p in model.parameters.items()}
    for i, text in enumerate(model.constraints):
        try:
            check_constraint(text, {**(dims or {}), **probe})
        except (ValueError, SyntaxError) as exc:
            raise InputError(str(exc), file=path, field=f"tunables.constraints[{i}]") from None
    return tunables


def spec_tunables(spec: Any, variant: str | None = None) -> Tunables | None:
    """The spec's ``tunables`` (kept by ``core.spec`` in ``spec.extra``), or ``None`` if it has none."""
    data = (getattr(spec, "extra", None) or {}).get("tunables")
    if data is None:
        return None
    dims = dict(spec.resolve(variant).dims)
    return parse_tunables(data, path=getattr(spec, "path", None), dims=dims)


# ---------------------------------------------------------------------------------------------------
# Reading and rewriting the constants in C++ source


def _patterns(name: str) -> list[re.Pattern[str]]:
    n = re.escape(name)
    return [
        re.compile(
            rf"^(?P<head>[ \t]*#[ \t]*define[ \t]+{n}[ \t]+)(?P<value>\(?-?\d+[uUlL]*\)?)(?P<tail>.*)$", re.M
        ),
        re.compile(
            rf"(?P<head>\bconstexpr[ \t]+(?:static[ \t]+)?(?:unsigned[ \t]+|signed[ \t]+)?(?:int|long|short|size_t|"
            rf"int32_t|int64_t|uint32_t|unsigned)?[ \t]*{n}[ \t]*=[ \t]*)(?P<value>-?\d+[uUlL]*)(?P<tail>[ \t]*;)"
        ),
    ]


def _as_int(text: str) -> int:
    return int(text.strip("()").rstrip("uUlL"))


def current_values(source: str, names: list[str]) -> dict[str, int | None]:
    """Value of each constant in the source (``None``: not declared in a form the stage can rewrite)."""
    found: dict[str, int | None] = {}
    for name in names:
        found[name] = None
        for pattern in _patterns(name):
            match = pattern.search(source)
            if match:
                found[name] = _as_int(match.group("value"))
                break
    return found


def apply_config(source: str, config: dict[str, int]) -> str:
    """Rewrite every declaration of each constant; raises ``ValueError`` for one that is not declared."""
    out = source
    for name, value in config.items():
        total = 0

        def replace(m: re.Match[str], v: int = value) -> str:
            return f"{m.group('head')}{v}{m.group('tail')}"

        for pattern in _patterns(name):
            out, count = pattern.subn(replace, out)
            total += count
        if total == 0:
            raise ValueError(
                f"tunable {name} is not declared in the kernel as '#define {name} <int>' or "
                f"'constexpr int {name} = <int>;'"
            )
    return out


def search_order(
    tunables: Tunables, dims: dict[str, Any], start: dict[str, int], seed: int = 0
) -> list[dict[str, int]]:
    """Legal configurations in the order the stage tries them.

    Deterministic: neighbours of the starting point (one parameter changed -- the author usually chose
    most values well) alternate with the rest of the legal space in a seeded shuffle (which spreads a
    limited budget over the whole space instead of one corner), so every batch has some of both.
    """
    legal = [c for c in tunables.legal_configs(dims) if c != start]
    neighbours = [c for c in legal if sum(c[k] != start.get(k) for k in c) == 1]
    rest = [c for c in legal if c not in neighbours]
    random.Random(seed).shuffle(rest)
    order: list[dict[str, int]] = []
    for near, far in itertools.zip_longest(neighbours, rest):
        order += [c for c in (near, far) if c is not None]
    return order


def batches(order: list[dict[str, int]], size: int) -> list[list[dict[str, int]]]:
    return [order[i : i + size] for i in range(0, len(order), size)]
