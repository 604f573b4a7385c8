"""Static checks of a Python kernel file (Triton, Gluon, ...), without running it.

Only rules that catch real mistakes: the file parses, has a kernel decorated for its DSL (the plugin
names the decorators), a ``Model`` class with ``forward``, and literal launch/tuning parameters that
Triton-family compilers reject (block sizes and ``num_warps`` must be powers of two).  Style opinions (Xe-Forge's "no torch.matmul in fusion stage",
"no .cpu()") are not errors here.
"""

from __future__ import annotations

import ast

BLOCK_PREFIXES = ("BLOCK", "TILE")


def _is_pow2(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0 and value & (value - 1) == 0


def _decorator_names(fn: ast.FunctionDef) -> list[str]:
    names = []
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        names.append(ast.unparse(target))
    return names


def jit_functions(tree: ast.AST, decorators: frozenset[str]) -> list[ast.FunctionDef]:
    """Functions decorated with one of ``decorators`` (e.g. ``triton.jit``), called or not."""
    wanted = decorators
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and any(d in wanted for d in _decorator_names(n))
    ]


def _check_literal_params(tree: ast.AST) -> list[str]:
    problems = []
    for node in ast.walk(tree):
        pairs: list[tuple[str, ast.AST]] = []
        if isinstance(node, ast.Call):
            pairs += [(kw.arg, kw.value) for kw in node.keywords if kw.arg]
        if isinstance(node, ast.Dict):
            pairs += [
                (k.value, v)
                for k, v in zip(node.keys, node.values, strict=False)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            ]
        for name, value in pairs:
            if not isinstance(value, ast.Constant) or not isinstance(value.value, int):
                continue
            upper = name.upper()
            if (upper.startswith(BLOCK_PREFIXES) or name == "num_warps") and not _is_pow2(value.value):
                problems.append(
                    f"line {value.lineno}: {name}={value.value} is not a power of two (Triton requires it)"
                )
            if name == "num_stages" and value.value < 1:
                problems.append(f"line {value.lineno}: num_stages={value.value} must be >= 1")
    return problems


def validate_model_source(source: str, *, decorators: frozenset[str], kernel_label: str) -> list[str]:
    """Problems that make ``source`` unusable as a kernel file; an empty list means it passed.

    ``decorators`` mark the DSL's kernels (``{"triton.jit", "jit"}``); ``kernel_label`` names them in
    the message when there is none (``"@triton.jit"``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [f"syntax error at line {exc.lineno}: {exc.msg}"]
    problems = []
    kernels = {fn.name for fn in jit_functions(tree, decorators)}
    if not kernels:
        problems.append(f"no {kernel_label} kernel found")
    else:
        # Any use of a kernel's name counts (launch, alias, passed to a helper): only a file that never
        # touches its kernels is flagged.
        launched = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if not kernels & launched:
            # A file whose forward computes with PyTorch ops alone would pass the oracle and "win".
            problems.append(
                f"none of the kernels ({', '.join(sorted(kernels))}) is used; forward must launch one (kernel[grid](...))"
            )
    models = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"]
    if not models:
        problems.append(
            "no top-level class Model (the kernel file convention: Model(torch.nn.Module) whose forward launches the kernels)"
        )
    elif not any(isinstance(n, ast.FunctionDef) and n.name == "forward" for n in models[0].body):
        problems.append("class Model has no forward method")
    problems += _check_literal_params(tree)
    return problems
