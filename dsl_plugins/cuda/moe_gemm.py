"""MoE expert GEMM as a tile-tunable kernel (kind ``moe_gemm``): a grouped GEMM over experts.

Each expert e multiplies its routed tokens [count_e, K] by its weight [N, K]^T, so the problem is a
grouped GEMM with groups (count_e, N, K); experts that received no token are empty groups.  The
program and the build are the grouped-GEMM ones (same binary serves both kinds).

Workload dims: ``tokens`` (alias ``total_tokens``), ``experts`` (alias ``num_experts``), ``top_k``
(default 1), ``N``, ``K``, ``proj`` (``gate_up`` | ``down``: a label for reports; give N and K of
that projection), ``routing``:

* ``balanced``: every expert gets tokens*top_k/experts (remainder to the first experts);
* ``uniform``: each token picks top_k distinct experts uniformly at random (seeded);
* ``skewed``: as uniform, with expert popularity proportional to 1/rank**``skew`` (default 1.2) over a
  seeded random ranking: a few hot experts, many cold ones;
* ``recorded``: ``counts`` gives the per-expert token counts recorded from a model (length = experts,
  sum = tokens * top_k).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernelpilot.dsl_plugins.cuda.grouped_gemm import (
    MAX_DIM,
    MAX_GROUPS,
    GroupedGemmKernel,
    _as_int,
    check_group_list,
    check_layout,
    grouped_problem,
    normalize_dtype,
)
from kernelpilot.errors import InputError

ROUTINGS = ("balanced", "uniform", "skewed", "recorded")
MOE_KEYS = {
    "tokens",
    "total_tokens",
    "experts",
    "num_experts",
    "top_k",
    "N",
    "K",
    "proj",
    "routing",
    "skew",
    "seed",
    "counts",
    "layout",
}


def route_tokens(
    tokens: int, experts: int, top_k: int, routing: str, seed: int = 0, skew: float = 1.2
) -> list[int]:
    """Per-expert token counts; sum = tokens * top_k.  numpy's PCG64 keeps them identical everywhere."""
    if routing == "balanced":
        base, rem = divmod(tokens * top_k, experts)
        return [base + (1 if e < rem else 0) for e in range(experts)]
    rng = np.random.default_rng(seed)
    if routing == "uniform":
        weights = np.ones(experts)
    elif routing == "skewed":
        ranks = rng.permutation(experts) + 1
        weights = 1.0 / ranks.astype(float) ** skew
    else:
        raise ValueError(routing)
    p = weights / weights.sum()
    # top_k distinct experts per token: Gumbel top-k == sampling without replacement by weight.
    gumbel = rng.gumbel(size=(tokens, experts)) + np.log(p)[None, :]
    chosen = np.argpartition(-gumbel, top_k - 1, axis=1)[:, :top_k]
    counts = np.bincount(chosen.ravel(), minlength=experts)
    return [int(c) for c in counts]


def validate_moe_dims(dims: dict[str, Any], where: str) -> dict[str, Any]:
    unknown = set(dims) - MOE_KEYS
    if unknown:
        raise InputError(
            f"unknown dims {sorted(unknown)}; allowed: {sorted(MOE_KEYS)}", field=f"{where}.dims"
        )
    check_layout(dims, where)

    def pick(name: str, alias: str) -> int:
        if name in dims and alias in dims:
            raise InputError(f"give {name} or {alias}, not both", field=f"{where}.dims.{name}")
        key = name if name in dims else alias
        if key not in dims:
            raise InputError(f"missing {name}", field=f"{where}.dims.{name}")
        return _as_int(dims[key], f"{where}.dims.{key}")

    tokens = pick("tokens", "total_tokens")
    experts = pick("experts", "num_experts")
    top_k = _as_int(dims.get("top_k", 1), f"{where}.dims.top_k")
    for key in ("N", "K"):
        if key not in dims:
            raise InputError(f"missing {key}", field=f"{where}.dims.{key}")
    n = _as_int(dims["N"], f"{where}.dims.N")
    k = _as_int(dims["K"], f"{where}.dims.K")
    if not 1 <= tokens <= MAX_DIM:
        raise InputError(f"tokens={tokens}; allowed 1..{MAX_DIM}", field=f"{where}.dims.tokens")
    if not 1 <= experts <= MAX_GROUPS:
        raise InputError(f"experts={experts}; allowed 1..{MAX_GROUPS}", field=f"{where}.dims.experts")
    if not 1 <= top_k <= experts:
        raise InputError(f"top_k={top_k}; allowed 1..experts={experts}", field=f"{where}.dims.top_k")
    proj = str(dims.get("proj", "gate_up"))
    if proj not in ("gate_up", "down"):
        raise InputError(f"proj {proj!r}; allowed: gate_up, down", field=f"{where}.dims.proj")
    routing = str(dims.get("routing", "uniform"))
    if routing not in ROUTINGS:
        raise InputError(f"routing {routing!r}; allowed: {list(ROUTINGS)}", field=f"{where}.dims.routing")
    seed = _as_int(dims.get("seed", 0), f"{where}.dims.seed")
    skew = dims.get("skew", 1.2)
    if "skew" in dims and routing != "skewed":
        raise InputError("skew applies only to routing: skewed", field=f"{where}.dims.skew")
    if "counts" in dims and routing != "recorded":
        raise InputError("counts applies only to routing: recorded", field=f"{where}.dims.counts")
    try:
        skew = float(skew)
    except (TypeError, ValueError) as exc:
        raise InputError(f"skew {skew!r} is not a number", field=f"{where}.dims.skew") from exc
    if not 0 < skew <= 8:
        raise InputError(f"skew={skew}; allowed (0, 8]", field=f"{where}.dims.skew")
    if routing == "recorded":
        raw = dims.get("counts")
        if not isinstance(raw, (list, tuple)):
            raise InputError(
                "routing: recorded needs counts: [c_0, ..., c_{E-1}]", field=f"{where}.dims.counts"
            )
        counts = [_as_int(c, f"{where}.dims.counts[{i}]") for i, c in enumerate(raw)]
        if len(counts) != experts or any(c < 0 for c in counts) or sum(counts) != tokens * top_k:
            raise InputError(
                f"counts must have {experts} entries >= 0 summing to tokens*top_k={tokens * top_k}; "
                f"got {len(counts)} entries summing to {sum(counts)}",
                field=f"{where}.dims.counts",
            )
    else:
        counts = route_tokens(tokens, experts, top_k, routing, seed=seed, skew=skew)
    groups = check_group_list([[c, n, k] for c in counts], f"{where}.dims")
    problem = grouped_problem(
        groups,
        {
            "kind": "moe",
            "tokens": tokens,
            "experts": experts,
            "top_k": top_k,
            "N": n,
            "K": k,
            "proj": proj,
            "routing": routing,
            "seed": seed,
            **({"skew": skew} if routing == "skewed" else {}),
        },
    )
    # the hw model's MoE view (hw_models/problems.py moe_tokens / gemm_problems): per-expert tokens
    problem.update(
        {"num_experts": experts, "tokens": counts, "total_tokens": tokens, "top_k": top_k, "N": n, "K": k}
    )
    return problem


class MoeGemmKernel(GroupedGemmKernel):
    """``moe_gemm`` on sm90: the grouped-GEMM program over per-expert token counts."""

    kind = "moe_gemm"

    def validate_problem(self, dims: dict[str, Any], dtype: Any, where: str) -> dict[str, Any]:
        problem = validate_moe_dims(dict(dims), where)
        problem["dtype"] = normalize_dtype(dtype, where)
        return problem
