"""Rules-engine rewrite: wrap ``@triton.jit`` kernels in ``@triton.autotune``.

What it does, per kernel, deterministically from the AST:

1. finds every launch site ``kernel[grid](...)``;
2. picks the *tunable* block-size constexprs: ``BLOCK*``/``TILE*`` parameters that every launch site
   passes by keyword as a literal (or a local variable bound once to a literal and used nowhere else).
   A block size computed from the shape (``triton.next_power_of_2(n_cols)``) is not tunable: the
   kernel relies on it covering the row, so it stays a launch argument;
3. builds configs from per-device lists (tile shapes for ``tl.dot`` kernels, chunk sizes for
   reductions, ``num_warps``/``num_stages``), always including the kernel's original setting so
   autotuning can never pick something worse than what the user had;
4. keys the autotuner on the kernel's integer shape arguments (never on pointers or strides);
5. rewrites launch grids to ``lambda META: ...`` -- variables holding tuned values, and literal tile
   sizes inside ``triton.cdiv`` on a grid axis whose ``tl.program_id`` is scaled by a tuned parameter,
   become ``META['BLOCK_X']`` -- and removes the tuned keywords and ``num_warps``/``num_stages`` from
   the launch.  A parameter whose grid cannot be rewritten safely is left untuned.

Correctness is never assumed: the pipeline runs the result against the oracle.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, field
from typing import Any

from kernelpilot.dsl_plugins.triton.rewrite.source_edit import (
    Edit,
    apply_edits,
    indentation_of,
    insert_before_line,
    replace_node,
)

TUNABLE_PREFIXES = ("BLOCK", "TILE")
# constexprs set (not searched) from the user's settings when the kernel takes them
SET_FROM_HINTS = {"GROUP_SIZE_M": "group_size_m", "GROUP_M": "group_size_m", "grf_mode": "grf_mode"}
LAUNCH_KWARGS = ("num_warps", "num_stages", "num_ctas", "maxnreg")

# Per-device search lists.  Hopper (cuda) numbers follow the Triton matmul tutorial's configs;
# Intel Xe (xpu) prefers large work-groups (num_warps 16-32, i.e. 16-32 sub-groups) and 2-3 stages.
DOT_TILES_MNK = {
    "cuda": [
        (128, 256, 64, 8, 3),
        (256, 128, 64, 8, 3),
        (128, 128, 64, 8, 3),
        (128, 128, 32, 4, 4),
        (128, 64, 32, 4, 4),
        (64, 128, 32, 4, 4),
        (64, 256, 32, 4, 4),
        (128, 32, 32, 4, 4),
        (64, 64, 64, 4, 3),
        (64, 32, 32, 2, 5),
    ],
    "xpu": [
        (256, 256, 32, 32, 2),
        (256, 128, 32, 32, 2),
        (128, 256, 32, 32, 2),
        (128, 128, 32, 16, 2),
        (128, 64, 32, 8, 3),
        (64, 128, 32, 8, 3),
        (64, 64, 64, 8, 2),
    ],
    "cpu": [(64, 64, 32, 4, 2), (32, 32, 32, 4, 2)],
}
DOT_TILES_MN = {
    "cuda": [
        (128, 64, 8, 3),
        (128, 128, 8, 3),
        (128, 64, 4, 3),
        (64, 64, 4, 3),
        (64, 128, 4, 3),
        (128, 32, 4, 4),
        (64, 32, 4, 4),
        (128, 64, 8, 4),
        (64, 64, 4, 4),
    ],
    "xpu": [(128, 64, 16, 2), (128, 128, 32, 2), (64, 64, 8, 2), (256, 64, 32, 2), (128, 32, 16, 3)],
    "cpu": [(32, 32, 4, 2), (64, 32, 4, 2)],
}
REDUCTION_BLOCKS = {"cuda": [512, 1024, 2048, 4096], "xpu": [512, 1024, 2048, 4096], "cpu": [512]}
WARPS = {"cuda": [4, 8, 16], "xpu": [8, 16, 32], "cpu": [4]}
DOT_WARPS = {"cuda": [4, 8], "xpu": [16, 32], "cpu": [4]}
STAGES = {"cuda": [1, 2, 3], "xpu": [2, 3], "cpu": [1]}
DEFAULT_STAGES = {"cuda": 3, "xpu": 2, "cpu": 3}
MAX_CONFIGS = {"cuda": 16, "xpu": 16, "cpu": 3}


@dataclass(frozen=True)
class TuneHints:
    """The user's device defaults (settings DEFAULT_NUM_WARPS/STAGES, PREFERRED_TILE_M/N/K,
    GROUP_SIZE_M, GRF_MODE): the first config after the kernel's own is built from them, and they
    lead the warps/stages lists, so a capped list always contains what the user asked for."""

    num_warps: int | None = None
    num_stages: int | None = None
    tile_m: int | None = None
    tile_n: int | None = None
    tile_k: int | None = None
    group_size_m: int | None = None
    grf_mode: str | None = None

    @classmethod
    def from_settings(cls, settings: Any) -> TuneHints:
        if settings is None:
            return cls()
        return cls(
            num_warps=getattr(settings, "default_num_warps", None),
            num_stages=getattr(settings, "default_num_stages", None),
            tile_m=getattr(settings, "preferred_tile_m", None),
            tile_n=getattr(settings, "preferred_tile_n", None),
            tile_k=getattr(settings, "preferred_tile_k", None),
            group_size_m=getattr(settings, "group_size_m", None),
            grf_mode=getattr(settings, "grf_mode", None),
        )


def _lead(values: list[int], first: int | None) -> list[int]:
    return values if first is None else [first] + [v for v in values if v != first]


@dataclass
class LaunchSite:
    call: ast.Call
    grid: ast.AST
    func: ast.FunctionDef  # enclosing function (e.g. Model.forward)


@dataclass
class KernelPlan:
    kernel: ast.FunctionDef
    sites: list[LaunchSite]
    tuned: dict[str, int] = field(default_factory=dict)  # param -> original value
    fixed_warps: int | None = None
    fixed_stages: int | None = None
    key: list[str] = field(default_factory=list)
    has_dot: bool = False
    restore: list[str] = field(default_factory=list)  # in-place pointers (restore_value)
    notes: list[str] = field(default_factory=list)


@dataclass
class AutotuneResult:
    source: str
    changed: bool
    kernels: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _dec_name(dec: ast.AST) -> str:
    return ast.unparse(dec.func if isinstance(dec, ast.Call) else dec)


def _is_constexpr(arg: ast.arg) -> bool:
    return arg.annotation is not None and ast.unparse(arg.annotation).endswith("constexpr")


def _address_bases(fn: ast.FunctionDef) -> dict[str, set[str]]:
    """Parameters used as the base address of loads, stores and other memory ops, by operation.

    Follows simple local aliases (``row_ptr = x_ptr + row * stride``), block pointers
    (``tl.make_block_ptr(base=x_ptr, ...)``) and ``tl.advance``.
    """
    params = {a.arg for a in fn.args.args}
    assigns: dict[str, ast.AST] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigns.setdefault(node.targets[0].id, node.value)

    def leftmost(expr: ast.AST, depth: int = 0) -> str | None:
        if depth > 6:
            return None
        while isinstance(expr, ast.BinOp):
            expr = expr.left
        if isinstance(expr, ast.Call):
            fname = ast.unparse(expr.func).split(".")[-1]
            base = next((k.value for k in expr.keywords if k.arg == "base"), None)
            if (
                base is None
                and fname in ("make_block_ptr", "make_tensor_descriptor", "advance")
                and expr.args
            ):
                base = expr.args[0]
            return leftmost(base, depth + 1) if base is not None else None
        if isinstance(expr, ast.Name):
            if expr.id in params:
                return expr.id
            if expr.id in assigns:
                return leftmost(assigns[expr.id], depth + 1)
        return None

    bases: dict[str, set[str]] = {"load": set(), "store": set(), "other": set()}
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and node.args:
            op = ast.unparse(node.func).split(".")[-1]
            if (
                op in ("load", "store")
                or op.startswith("atomic_")
                or op in ("make_block_ptr", "make_tensor_descriptor")
            ):
                base = leftmost(node.args[0]) if op not in ("make_block_ptr",) else leftmost(node)
                if base:
                    bases[op if op in ("load", "store") else "other"].add(base)
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "base":
                    base = leftmost(kw.value)
                    if base:
                        bases["other"].add(base)
    return bases


def _pointer_params(fn: ast.FunctionDef) -> set[str]:
    """Parameters that hold addresses: named ``*ptr*`` or used as the base of a memory operation."""
    found = {a.arg for a in fn.args.args if "ptr" in a.arg.lower()}
    for names in _address_bases(fn).values():
        found |= names
    return found


def _in_place_params(fn: ast.FunctionDef) -> list[str]:
    """Pointers the kernel both loads from and stores to: autotuning runs the kernel once per config,
    so their contents must be restored between runs (``restore_value``)."""
    bases = _address_bases(fn)
    order = [a.arg for a in fn.args.args]
    return [p for p in order if p in bases["load"] and p in bases["store"]]


def _axis_params(fn: ast.FunctionDef, tunable: set[str]) -> dict[int, str]:
    """Grid axis -> tuned parameter that scales ``tl.program_id(axis)`` (``pid_m * BLOCK_M``)."""
    pid_axis: dict[str, int] = {}
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func).endswith("program_id")
        ):
            axis = node.value.args[0] if node.value.args else None
            for kw in node.value.keywords:
                if kw.arg == "axis":
                    axis = kw.value
            if isinstance(axis, ast.Constant) and isinstance(axis.value, int):
                pid_axis[node.targets[0].id] = axis.value
    found: dict[int, str] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            names = [n.id for n in (node.left, node.right) if isinstance(n, ast.Name)]
            pids = [n for n in names if n in pid_axis]
            params = [n for n in names if n in tunable]
            if pids and params:
                found.setdefault(pid_axis[pids[0]], params[0])
    return found


def _name_loads(fn: ast.FunctionDef, name: str) -> list[ast.Name]:
    return [
        n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
    ]


def _single_assign(fn: ast.FunctionDef, name: str) -> ast.Assign | None:
    found = [
        n
        for n in ast.walk(fn)
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
        and any(
            isinstance(t, ast.Name) and t.id == name
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        )
    ]
    return found[0] if len(found) == 1 and isinstance(found[0], ast.Assign) else None


def _literal_int(fn: ast.FunctionDef, expr: ast.AST) -> tuple[int | None, str | None]:
    """(value, local variable name) if ``expr`` is an int literal or a local bound once to one."""
    if (
        isinstance(expr, ast.Constant)
        and isinstance(expr.value, int | str)
        and not isinstance(expr.value, bool)
    ):
        return expr.value, None  # type: ignore[return-value]  # a str only for grf_mode
    if isinstance(expr, ast.Name):
        assign = _single_assign(fn, expr.id)
        if (
            assign is not None
            and isinstance(assign.value, ast.Constant)
            and isinstance(assign.value.value, int)
        ):
            return assign.value.value, expr.id
    return None, None


class _GridRewriter(ast.NodeTransformer):
    """Turn references to tuned values inside a grid expression into ``META['P']``."""

    def __init__(self, var_to_param: dict[str, str], literal_by_axis: dict[int, tuple[int, str]]) -> None:
        self.var_to_param = var_to_param
        self.literal_by_axis = literal_by_axis
        self.axis: int | None = None
        self.used: set[str] = set()

    @staticmethod
    def meta(param: str) -> ast.Subscript:
        return ast.Subscript(value=ast.Name("META", ast.Load()), slice=ast.Constant(param), ctx=ast.Load())

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.var_to_param and isinstance(node.ctx, ast.Load):
            self.used.add(self.var_to_param[node.id])
            return self.meta(self.var_to_param[node.id])
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if (
            self.axis in self.literal_by_axis
            and ast.unparse(node.func).endswith("cdiv")
            and len(node.args) == 2
        ):
            value, param = self.literal_by_axis[self.axis]
            second = node.args[1]
            if isinstance(second, ast.Constant) and second.value == value:
                node.args[1] = self.meta(param)
                self.used.add(param)
        return node

    def rewrite_grid(self, grid: ast.AST) -> ast.AST:
        grid = _copy(grid)
        if isinstance(grid, ast.Tuple):
            elts = []
            for i, elt in enumerate(grid.elts):
                self.axis = i
                elts.append(self.visit(elt))
            grid.elts = elts
            self.axis = None
            return grid
        self.axis = 0
        out = self.visit(grid)
        self.axis = None
        return out


def _copy(node: ast.AST) -> ast.AST:
    return ast.parse(ast.unparse(node), mode="eval").body


def _role(name: str) -> str:
    upper = name.upper()
    for suffix, role in (("_M", "M"), ("_N", "N"), ("_K", "K"), ("_Q", "M"), ("_KV", "N")):
        if upper.endswith(suffix):
            return role
    return "?"


def build_configs(
    plan: KernelPlan,
    device: str,
    *,
    tune_blocks: bool = True,
    max_configs: int | None = None,
    hints: TuneHints | None = None,
) -> list[dict[str, Any]]:
    """Config list for one kernel: curated tiles for dot kernels, a small product otherwise.

    ``hints`` (the user's settings) give the first config after the kernel's own and lead the
    warps/stages lists; constexprs named in :data:`SET_FROM_HINTS` take the setting's value.
    """
    hints = hints or TuneHints()
    dev = device if device in WARPS else "cuda"
    cap = max_configs or MAX_CONFIGS[dev]
    original = {
        "kwargs": dict(plan.tuned),
        "num_warps": plan.fixed_warps or 4,
        "num_stages": plan.fixed_stages or DEFAULT_STAGES[dev],
    }
    configs: list[dict[str, Any]] = [original]
    tuned = [p for p in plan.tuned if p not in SET_FROM_HINTS] if tune_blocks else []
    set_values = {p: getattr(hints, SET_FROM_HINTS[p]) for p in plan.tuned if p in SET_FROM_HINTS}
    set_values = {p: v for p, v in set_values.items() if v is not None}
    roles = {p: _role(p) for p in tuned}
    by_role = {r: p for p, r in roles.items()}
    candidates: list[dict[str, Any]] = []
    dot_mnk = plan.has_dot and tuned and set(roles.values()) == {"M", "N", "K"} and len(tuned) == 3
    dot_mn = plan.has_dot and tuned and set(roles.values()) == {"M", "N"} and len(tuned) == 2
    tile_hint = {"M": hints.tile_m, "N": hints.tile_n, "K": hints.tile_k}
    if (dot_mnk or dot_mn) and any(tile_hint[r] for r in by_role):
        first = DOT_TILES_MNK[dev][0] if dot_mnk else DOT_TILES_MN[dev][0]
        preferred = {by_role[r]: tile_hint[r] or first["MNK".index(r)] for r in by_role}
        candidates.append(
            {
                "kwargs": preferred,
                "num_warps": hints.num_warps or first[-2],
                "num_stages": hints.num_stages or first[-1],
            }
        )
    elif hints.num_warps or hints.num_stages or set_values:
        candidates.append(
            {
                "kwargs": dict(plan.tuned),
                "num_warps": hints.num_warps or original["num_warps"],
                "num_stages": hints.num_stages or original["num_stages"],
            }
        )
    if dot_mnk:
        for bm, bn, bk, w, s in DOT_TILES_MNK[dev]:
            candidates.append(
                {
                    "kwargs": {by_role["M"]: bm, by_role["N"]: bn, by_role["K"]: bk},
                    "num_warps": w,
                    "num_stages": s,
                }
            )
    elif dot_mn:
        for bm, bn, w, s in DOT_TILES_MN[dev]:
            candidates.append(
                {"kwargs": {by_role["M"]: bm, by_role["N"]: bn}, "num_warps": w, "num_stages": s}
            )
    else:
        block_lists = []
        for p in tuned:
            orig = plan.tuned[p]
            values = (
                sorted({orig, *REDUCTION_BLOCKS[dev]}) if not plan.has_dot else sorted({orig, 32, 64, 128})
            )
            block_lists.append(values)
        warps = DOT_WARPS[dev] if plan.has_dot else WARPS[dev]
        stages = (STAGES[dev] if not plan.has_dot else [3, 4]) if dev == "cuda" else STAGES[dev]
        if not plan.has_dot and dev == "cuda":
            stages = [1, 2]  # a streaming reduction gains little from deeper pipelines
        warps, stages = _lead(warps, hints.num_warps), _lead(stages, hints.num_stages)
        # Diverse first: every block value with the first (warps, stages) pair, then the next pair...
        # so a capped list still spans the block sizes.
        launch = sorted(itertools.product(warps, stages), key=lambda ws: (ws[1], abs(ws[0] - 8)))
        for w, s in launch:
            for blocks in itertools.product(*block_lists):
                candidates.append(
                    {"kwargs": dict(zip(tuned, blocks, strict=True)), "num_warps": w, "num_stages": s}
                )
    # Keep the untuned constexprs at their original value in every config (settings-driven ones at
    # the setting's value, except in the kernel's own config).
    for c in candidates:
        full = dict(plan.tuned)
        full.update(c["kwargs"])
        full.update(set_values)
        c["kwargs"] = full
        if c not in configs:
            configs.append(c)
        if len(configs) >= cap:
            break
    return configs


def _render_decorator(
    configs: list[dict[str, Any]], key: list[str], indent: str, restore: list[str] | None = None
) -> str:
    lines = [f"{indent}@triton.autotune(", f"{indent}    configs=["]
    for c in configs:
        kw = ", ".join(f"{k!r}: {v!r}" for k, v in c["kwargs"].items())
        lines.append(
            f"{indent}        triton.Config({{{kw}}}, num_warps={c['num_warps']}, num_stages={c['num_stages']}),"
        )
    lines.append(f"{indent}    ],")
    lines.append(f"{indent}    key={key!r},")
    if restore:
        lines.append(f"{indent}    restore_value={restore!r},  # updated in place: reset between tuning runs")
    lines.append(f"{indent})")
    return "\n".join(lines) + "\n"


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}


def _enclosing_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.FunctionDef | None:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.FunctionDef):
            return node
    return None


def plan_kernels(tree: ast.Module) -> dict[str, KernelPlan]:
    """Analyse kernels and launch sites; decides what can be tuned (no source changes)."""
    parents = _parents(tree)
    kernels: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            decs = [_dec_name(d) for d in node.decorator_list]
            if any(d in ("triton.jit", "jit") for d in decs) and not any("autotune" in d for d in decs):
                kernels[node.name] = node
    plans: dict[str, KernelPlan] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Subscript)
            and isinstance(node.func.value, ast.Name)
        ):
            name = node.func.value.id
            if name in kernels:
                func = _enclosing_function(node, parents)
                if func is None:
                    continue
                plans.setdefault(name, KernelPlan(kernel=kernels[name], sites=[]))
                plans[name].sites.append(LaunchSite(call=node, grid=node.func.slice, func=func))
    for name, plan in plans.items():
        fn = plan.kernel
        if any(
            isinstance(n, ast.Call) and ast.unparse(n.func).split(".")[-1].startswith("atomic_")
            for n in ast.walk(fn)
        ):
            plan.notes.append(
                f"{name}: uses atomics; autotuning would run it repeatedly on the same output -- skipped"
            )
            plan.sites = []
            continue
        plan.has_dot = any(
            isinstance(n, ast.Call) and ast.unparse(n.func).endswith(".dot") for n in ast.walk(fn)
        )
        constexprs = [a.arg for a in fn.args.args if _is_constexpr(a)]
        pointers = _pointer_params(fn)
        plan.restore = _in_place_params(fn)
        plan.key = [
            a.arg
            for a in fn.args.args
            if a.arg not in constexprs
            and a.arg not in pointers
            and not any(s in a.arg.lower() for s in ("stride", "eps", "scale", "seed", "alpha", "beta"))
        ]
        # launch-level num_warps / num_stages (must agree across sites to keep the original config)
        for kwname in ("num_warps", "num_stages"):
            values = set()
            for site in plan.sites:
                for kw in site.call.keywords:
                    if kw.arg == kwname:
                        v, _ = _literal_int(site.func, kw.value)
                        values.add(v)
            if len(values) == 1 and None not in values:
                setattr(plan, "fixed_warps" if kwname == "num_warps" else "fixed_stages", values.pop())
        for p in constexprs:
            if not p.upper().startswith(TUNABLE_PREFIXES) and p not in SET_FROM_HINTS:
                continue
            values = set()
            ok = True
            for site in plan.sites:
                kw = next((k for k in site.call.keywords if k.arg == p), None)
                if kw is None:
                    ok = False
                    break
                value, var = _literal_int(site.func, kw.value)
                if value is None:
                    ok = False
                    break
                if var is not None:
                    # the variable may appear only in the launch keyword and the grid
                    uses = _name_loads(site.func, var)
                    grid_nodes = _grid_nodes(site)
                    allowed = {id(kw.value)} | {id(n) for n in grid_nodes}
                    if any(id(u) not in allowed for u in uses):
                        ok = False
                        plan.notes.append(f"{name}: {p} stays fixed ({var} is used outside the launch)")
                        break
                values.add(value)
            if ok and len(values) == 1:
                plan.tuned[p] = values.pop()
    return plans


def _grid_nodes(site: LaunchSite) -> list[ast.AST]:
    """Nodes of the grid expression, following ``grid = (...)`` defined once in the same function."""
    grid = site.grid
    nodes = list(ast.walk(grid))
    if isinstance(grid, ast.Name):
        assign = _single_assign(site.func, grid.id)
        if assign is not None:
            nodes += list(ast.walk(assign.value))
    return nodes


def autotune_source(
    source: str,
    device: str = "cuda",
    *,
    tune_blocks: bool = True,
    max_configs: int | None = None,
    hints: TuneHints | None = None,
) -> AutotuneResult:
    """Return the source with every eligible ``@triton.jit`` kernel autotuned (see module docstring)."""
    tree = ast.parse(source)
    plans = plan_kernels(tree)
    edits: list[Edit] = []
    result = AutotuneResult(source=source, changed=False)
    for name, plan in plans.items():
        result.notes += plan.notes
        if not plan.sites:
            continue
        if not tune_blocks:
            plan.tuned = {}
        axis_params = _axis_params(plan.kernel, set(plan.tuned))
        site_edits: list[Edit] = []
        grid_ok = True
        for site in plan.sites:
            var_to_param: dict[str, str] = {}
            for kw in site.call.keywords:
                if kw.arg in plan.tuned:
                    _, var = _literal_int(site.func, kw.value)
                    if var:
                        var_to_param[var] = kw.arg
            literal_by_axis = {ax: (plan.tuned[p], p) for ax, p in axis_params.items()}
            rewriter = _GridRewriter(var_to_param, literal_by_axis)
            grid_src: ast.AST = site.grid
            grid_assign = None
            if isinstance(site.grid, ast.Name):
                grid_assign = _single_assign(site.func, site.grid.id)
                if grid_assign is None:
                    grid_ok = False
                    break
                grid_src = grid_assign.value
            if isinstance(grid_src, ast.Lambda):
                new_grid_text = None  # already META-based
                used = {
                    p
                    for p in plan.tuned
                    if f"'{p}'" in ast.unparse(grid_src) or f'"{p}"' in ast.unparse(grid_src)
                }
            else:
                new_grid = rewriter.rewrite_grid(grid_src)
                used = rewriter.used
                new_grid_text = "lambda META: " + ast.unparse(new_grid)
            # every axis scaled by a tuned parameter must now depend on META[that parameter]
            if any(p not in used for p in axis_params.values()):
                grid_ok = False
                break
            if new_grid_text is not None:
                if grid_assign is not None:
                    site_edits.append(replace_node(grid_assign.value, new_grid_text))
                else:
                    site_edits.append(replace_node(site.grid, new_grid_text))
            call = _copy(site.call)
            assert isinstance(call, ast.Call)
            call.keywords = [
                k for k in call.keywords if k.arg not in plan.tuned and k.arg not in LAUNCH_KWARGS
            ]
            call.func = ast.Name("__KP_FUNC__", ast.Load())
            args_text = ast.unparse(call)[len("__KP_FUNC__") :]
            site_edits.append(
                Edit(
                    site.call.func.end_lineno,
                    site.call.func.end_col_offset,
                    site.call.end_lineno,
                    site.call.end_col_offset,
                    args_text,
                )
            )
        if not grid_ok:
            result.notes.append(
                f"{name}: launch grid could not be rewritten to use META; block sizes left fixed"
            )
            plan.tuned = {}
            site_edits = []
            for site in plan.sites:
                call = _copy(site.call)
                call.keywords = [k for k in call.keywords if k.arg not in LAUNCH_KWARGS]
                call.func = ast.Name("__KP_FUNC__", ast.Load())
                args_text = ast.unparse(call)[len("__KP_FUNC__") :]
                site_edits.append(
                    Edit(
                        site.call.func.end_lineno,
                        site.call.func.end_col_offset,
                        site.call.end_lineno,
                        site.call.end_col_offset,
                        args_text,
                    )
                )
        configs = build_configs(
            plan, device, tune_blocks=bool(plan.tuned), max_configs=max_configs, hints=hints
        )
        first_dec = min(d.lineno for d in plan.kernel.decorator_list)
        indent = indentation_of(source, first_dec)
        edits.append(
            insert_before_line(first_dec, _render_decorator(configs, plan.key, indent, plan.restore))
        )
        edits.extend(site_edits)
        result.kernels[name] = {
            "tuned": dict(plan.tuned),
            "key": plan.key,
            "configs": len(configs),
            "dot": plan.has_dot,
            "restore_value": plan.restore,
        }
    if edits:
        result.source = apply_edits(source, edits)
        result.changed = result.source != source
        ast.parse(result.source)  # never hand back something that does not parse
    return result


def suggested_configs(source: str, device: str, hints: TuneHints | None = None) -> list[str]:
    """The configs :func:`autotune_source` would write, one line each, for the LLM's autotuning prompt;
    for a kernel with nothing it can tune, the device's tile list (the LLM may restructure the launch)."""
    dev = device if device in WARPS else "cuda"
    try:
        plans = plan_kernels(ast.parse(source))
    except SyntaxError:
        plans = {}
    lines: list[str] = []
    for name, plan in plans.items():
        if not plan.sites:
            continue
        for c in build_configs(plan, dev, tune_blocks=bool(plan.tuned), hints=hints):
            lines.append(f"{name}: {c['kwargs']}, num_warps={c['num_warps']}, num_stages={c['num_stages']}")
    if not lines:
        for bm, bn, bk, w, st in DOT_TILES_MNK[dev]:
            lines.append(f"tl.dot tile M={bm} N={bn} K={bk}, num_warps={w}, num_stages={st}")
    return lines
