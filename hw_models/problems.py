"""Problem dictionaries: the workload a config is checked against or timed on.

Dims are named the way users already write them (Xe-Forge's names):

- GEMM: ``M, N, K`` (+ ``batch``, default 1);
- grouped GEMM: ``groups: [[M, N, K], ...]`` (or ``M, N, K`` plus ``groups: G`` for G equal groups);
- MoE GEMM: ``num_experts, total_tokens, N, K`` and optionally ``tokens: [...]`` per expert
  (otherwise tokens are spread evenly);
- attention: ``batch, num_heads_q, num_heads_kv, seq_qo, seq_kv, head_dim`` (or ``head_dim_qk`` and
  ``head_dim_vo``), ``causal``;
- all: ``dtype`` and ``layout``.

``layout`` is two letters, A then B, ``r`` = row-major, ``c`` = column-major, with A stored M x K and
B stored K x N.  ``rr`` (A row-major, B row-major K x N: PyTorch's ``x @ W``) is the default;
``rc`` is the classic "TN" (both operands K-major).  D is always row-major M x N.
"""

from __future__ import annotations

from typing import Any

from kernelpilot.errors import InputError

LAYOUTS = ("rr", "rc", "cr", "cc")


def problem_layout(problem: dict[str, Any] | None) -> str:
    layout = (problem or {}).get("layout", "rr")
    if layout not in LAYOUTS:
        raise InputError(f"problem: layout {layout!r} is not one of {', '.join(LAYOUTS)}", field="layout")
    return layout


def _dim(problem: dict[str, Any], name: str) -> int:
    if name not in problem:
        raise InputError(f"problem: missing dimension {name!r}", field=name)
    value = problem[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"problem: {name} must be a positive integer, got {value!r}", field=name)
    return value


def moe_tokens(problem: dict[str, Any]) -> list[int]:
    experts = _dim(problem, "num_experts")
    if "tokens" in problem:
        tokens = problem["tokens"]
        if (
            not isinstance(tokens, list)
            or len(tokens) != experts
            or any(isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in tokens)
        ):
            raise InputError(
                f"problem: tokens must be a list of {experts} non-negative integers (one per expert)",
                field="tokens",
            )
        return list(tokens)
    total = _dim(problem, "total_tokens")
    base, extra = divmod(total, experts)
    return [base + (1 if i < extra else 0) for i in range(experts)]


def gemm_problems(problem: dict[str, Any], kernel: str) -> list[tuple[int, int, int]]:
    """The list of (M, N, K) GEMMs a problem stands for (one for plain GEMM, one per group/expert)."""
    if kernel == "grouped_gemm":
        # per-group shapes: ``groups: [[M, N, K], ...]``, or ``shapes`` next to a group count (the form
        # the SYCL plugin's validated problem has, where M, N, K are the largest extents)
        groups = problem.get("shapes") if isinstance(problem.get("shapes"), list) else problem.get("groups")
        if isinstance(groups, list):
            out = []
            for i, g in enumerate(groups):
                if not (
                    isinstance(g, (list, tuple))
                    and len(g) == 3
                    and all(isinstance(x, int) and x > 0 for x in g)
                ):
                    raise InputError(
                        f"problem: groups[{i}] must be [M, N, K] positive integers, got {g!r}", field="groups"
                    )
                out.append((g[0], g[1], g[2]))
            if not out:
                raise InputError("problem: groups is empty", field="groups")
            return out
        count = _dim(problem, "groups") if "groups" in problem else 1
        return [(_dim(problem, "M"), _dim(problem, "N"), _dim(problem, "K"))] * count
    if kernel == "moe_gemm":
        n, k = _dim(problem, "N"), _dim(problem, "K")
        return [(t, n, k) for t in moe_tokens(problem) if t > 0]
    return [(_dim(problem, "M"), _dim(problem, "N"), _dim(problem, "K"))]


def batch(problem: dict[str, Any]) -> int:
    return int(problem.get("batch", 1) or 1)


def gemm_flops(problem: dict[str, Any], kernel: str) -> float:
    return 2.0 * batch(problem) * sum(m * n * k for m, n, k in gemm_problems(problem, kernel))


def attention_dims(problem: dict[str, Any]) -> dict[str, int]:
    """Normalised attention dims: head_dim_qk/head_dim_vo filled from head_dim, num_heads_kv defaulted."""
    out = {name: _dim(problem, name) for name in ("batch", "num_heads_q", "seq_qo", "seq_kv")}
    out["num_heads_kv"] = _dim(problem, "num_heads_kv") if "num_heads_kv" in problem else out["num_heads_q"]
    if "head_dim" in problem:
        out["head_dim_qk"] = out["head_dim_vo"] = _dim(problem, "head_dim")
    else:
        out["head_dim_qk"] = _dim(problem, "head_dim_qk")
        out["head_dim_vo"] = _dim(problem, "head_dim_vo")
    if out["num_heads_q"] % out["num_heads_kv"]:
        raise InputError(
            f"problem: num_heads_q={out['num_heads_q']} is not a multiple of num_heads_kv={out['num_heads_kv']}",
            field="num_heads_kv",
        )
    return out


def attention_flops(problem: dict[str, Any]) -> float:
    d = attention_dims(problem)
    pairs = d["seq_qo"] * d["seq_kv"]
    if problem.get("causal"):
        pairs = pairs / 2 if d["seq_qo"] == d["seq_kv"] else pairs  # rough
    return 2.0 * d["batch"] * d["num_heads_q"] * pairs * (d["head_dim_qk"] + d["head_dim_vo"])
