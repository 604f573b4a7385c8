"""Rules analysis: static AST/regex checks of a Python-based kernel file (Triton, Gluon).

This is the analysis the rules engine uses (no LLM): cheap, deterministic findings that map onto
stages through :data:`~kernelpilot.pipeline.contracts.ISSUE_CATEGORIES`.  Each check only reports
what it can see in the source (with a line number); it never guesses about performance it cannot
observe.  Plugins add DSL-specific analyzers through ``kp_analyzers``.
"""

from __future__ import annotations

import ast
import re

from kernelpilot.pipeline.contracts import Issue

PYTHON_DSLS = ("triton", "gluon")
_JIT_NAMES = {"triton.jit", "jit", "gluon.jit", "triton.experimental.gluon.jit"}
_AUTOTUNE_NAMES = {"triton.autotune", "autotune"}
_FLOAT64 = re.compile(r"\b(tl\.float64|torch\.float64|torch\.double|gl\.float64)\b|\.double\(\)")
_SYNC = re.compile(r"\.item\(\)|\.cpu\(\)|\.tolist\(\)|torch\.cuda\.synchronize\(|\.numpy\(\)")
_TORCH_ELEMENTWISE = {
    "relu",
    "gelu",
    "silu",
    "sigmoid",
    "tanh",
    "exp",
    "softmax",
    "add",
    "mul",
    "layer_norm",
    "dropout",
    "clamp",
    "where",
}


def _decorators(fn: ast.FunctionDef) -> list[str]:
    return [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in fn.decorator_list]


def _jit_functions(tree: ast.AST) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and set(_decorators(n)) & _JIT_NAMES]


def _constexpr_params(fn: ast.FunctionDef) -> set[str]:
    names = set()
    for arg in fn.args.args + fn.args.kwonlyargs:
        if arg.annotation is not None and "constexpr" in ast.unparse(arg.annotation):
            names.add(arg.arg)
    return names


def _launches(tree: ast.AST, kernel_names: set[str]) -> list[ast.Call]:
    """Calls of the form ``kernel[grid](...)`` for the given kernel names."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Subscript)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in kernel_names
        ):
            found.append(node)
    return found


def _forward(tree: ast.AST) -> ast.FunctionDef | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    return item
    return None


def analyze_python_kernel(source: str, dsl: str = "triton") -> list[Issue]:
    """Static findings for a Triton/Gluon file; a file that does not parse yields no issues."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    issues: list[Issue] = []
    lines = source.splitlines()

    for number, text in enumerate(lines, start=1):
        code = text.split("#", 1)[0]
        if _FLOAT64.search(code):
            issues.append(
                Issue(
                    "float64_usage",
                    f"float64 arithmetic: `{code.strip()}` (GPUs run fp64 at a fraction of fp32 speed)",
                    line=number,
                    severity="high",
                    suggestion="compute in float32 (or the input dtype) if the reference still matches",
                )
            )

    kernels = _jit_functions(tree)
    kernel_names = {k.name for k in kernels}
    constexprs = {k.name: _constexpr_params(k) for k in kernels}
    if dsl == "triton":
        for kernel in kernels:
            if not set(_decorators(kernel)) & _AUTOTUNE_NAMES:
                tunable = sorted(
                    p for p in constexprs[kernel.name] if p.upper().startswith(("BLOCK", "TILE", "GROUP"))
                )
                issues.append(
                    Issue(
                        "missing_autotune",
                        f"kernel `{kernel.name}` has no @triton.autotune"
                        + (f" (tunable constexprs: {', '.join(tunable)})" if tunable else ""),
                        line=kernel.lineno,
                        severity="medium" if tunable else "low",
                        suggestion="autotune block sizes, num_warps and num_stages keyed on the shape arguments",
                    )
                )

    for call in _launches(tree, kernel_names):
        launched = call.func.value.id  # type: ignore[attr-defined]
        for kw in call.keywords:
            if kw.arg is None or not isinstance(kw.value, ast.Constant):
                continue
            value = kw.value.value
            if kw.arg in constexprs.get(launched, set()) and isinstance(value, int):
                issues.append(
                    Issue(
                        "hardcoded_block_size",
                        f"launch of `{launched}` fixes {kw.arg}={value}",
                        line=call.lineno,
                        severity="medium",
                        suggestion="let the autotuner choose it (grid from META)",
                    )
                )
            elif kw.arg in ("num_warps", "num_stages") and isinstance(value, int):
                issues.append(
                    Issue(
                        "hardcoded_launch_config",
                        f"launch of `{launched}` fixes {kw.arg}={value}",
                        line=call.lineno,
                        severity="low",
                        suggestion="tune num_warps/num_stages per device",
                    )
                )

    if dsl == "triton":
        for kernel in kernels:
            body = ast.unparse(kernel)
            raw_pointers = "make_block_ptr" not in body and "make_tensor_descriptor" not in body
            if "tl.load(" in body and raw_pointers and ("[:, None]" in body or "[None, :]" in body):
                issues.append(
                    Issue(
                        "manual_pointer_arithmetic",
                        f"kernel `{kernel.name}` builds 2-D tiles from raw pointer arithmetic",
                        line=kernel.lineno,
                        severity="low",
                        suggestion="block pointers / tensor descriptors let the compiler use TMA / 2D block loads",
                    )
                )
            if re.search(r"tl\.sum\([^\n]*\[:, :, None\]|tl\.sum\([^\n]*\[None, :, :\]", body):
                issues.append(
                    Issue(
                        "tensor_cores_unused",
                        f"kernel `{kernel.name}` multiplies tiles by broadcast + tl.sum instead of tl.dot",
                        line=kernel.lineno,
                        severity="high",
                        suggestion="use tl.dot so the tile product runs on tensor cores",
                    )
                )

    forward = _forward(tree)
    if forward is not None:
        launches = _launches(forward, kernel_names)
        if len(launches) > 1:
            issues.append(
                Issue(
                    "extra_kernel_launches",
                    f"forward launches {len(launches)} kernels; intermediates round-trip through memory",
                    line=forward.lineno,
                    severity="medium",
                    suggestion="fuse the launches into one kernel",
                )
            )
        for node in ast.walk(forward):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                short = name.rsplit(".", 1)[-1]
                if (
                    launches
                    and name.startswith(("torch.", "F.", "torch.nn.functional."))
                    and short in _TORCH_ELEMENTWISE
                ):
                    issues.append(
                        Issue(
                            "unfused_operations",
                            f"`{name}` runs as a separate PyTorch op next to the Triton kernel",
                            line=node.lineno,
                            severity="medium",
                            suggestion="fuse it into the kernel's epilogue",
                        )
                    )
        for number in range(forward.lineno, (forward.end_lineno or forward.lineno) + 1):
            code = lines[number - 1].split("#", 1)[0]
            if _SYNC.search(code):
                issues.append(
                    Issue(
                        "host_device_sync",
                        f"host-device synchronisation in forward: `{code.strip()}`",
                        line=number,
                        severity="medium",
                        suggestion="keep values on the device",
                    )
                )
    return issues


def static_issues(source: str, dsl: str, analyzers: list[object]) -> list[Issue]:
    """Core checks for Python DSLs plus every plugin analyzer for ``dsl``; duplicates removed."""
    issues = analyze_python_kernel(source, dsl) if dsl in PYTHON_DSLS else []
    for analyzer in analyzers:
        if getattr(analyzer, "dsl", None) == dsl:
            issues.extend(analyzer.analyze(source))  # type: ignore[attr-defined]
    seen: set[tuple[str, int | None, str]] = set()
    unique = []
    for issue in issues:
        key = (issue.category, issue.line, issue.message)
        if key not in seen:
            seen.add(key)
            unique.append(issue)
    return unique
