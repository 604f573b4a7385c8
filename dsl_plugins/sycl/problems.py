"""Workload dims of the Xe kernels: names Xe-Forge users already write, validated with clear errors.

GEMM ``M, N, K`` (+ ``layout``, ``out_dtype``); attention ``head_dim`` (or ``head_dim_qk`` and
``head_dim_vo``), ``batch``, ``num_heads_q``, ``num_heads_kv``, ``seq_qo``, ``seq_kv``, ``causal``,
``fa_mode``, ``persistent``; MoE ``N, K, num_experts, total_tokens`` (or ``tokens_per_expert``);
grouped GEMM ``M, N, K, groups`` (every group that shape) or ``shapes: [[M, N, K], ...]`` (groups of
different sizes).  Every error names ``where`` (file and workload), the field and what is allowed;
nothing is replaced by a default silently (the few defaults are documented in docs/sycl_backend.md).
"""

from __future__ import annotations

import random
from typing import Any

from kernelpilot.dsl_plugins.sycl import dtypes
from kernelpilot.errors import InputError

LAYOUTS = {"rr": ("row", "row"), "rc": ("row", "col"), "cr": ("col", "row"), "cc": ("col", "col")}
FA_DTYPES = ("bf16", "f16", "e4m3", "e5m2")
MOE_DTYPES = ("bf16", "f16")


def _reject_unknown(dims: dict[str, Any], allowed: set[str], where: str, kind: str) -> None:
    unknown = sorted(set(dims) - allowed)
    if unknown:
        raise InputError(
            f"{where}: unknown dims {unknown} for {kind}; allowed: {', '.join(sorted(allowed))}", field="dims"
        )


def _pos_int(dims: dict[str, Any], name: str, where: str, kind: str, default: int | None = None) -> int:
    if name not in dims:
        if default is not None:
            return default
        raise InputError(f"{where}: missing dim {name} ({kind})", field=f"dims.{name}")
    value = dims[name]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(f"{where}: dim {name}={value!r} must be a positive integer", field=f"dims.{name}")
    return value


def _bool(dims: dict[str, Any], name: str, where: str, default: bool = False) -> bool:
    value = dims.get(name, default)
    if not isinstance(value, bool):
        raise InputError(f"{where}: {name}={value!r} must be true or false", field=f"dims.{name}")
    return value


def _align(bits: int) -> int:
    """Elements per 16 bytes: sycl-tla's can_implement needs 16-byte contiguous extents (xe_mma.hpp:140-169)."""
    return 128 // bits


def _check_multiple(value: int, multiple: int, name: str, why: str, where: str) -> None:
    if value % multiple:
        raise InputError(
            f"{where}: {name}={value} is not a multiple of {multiple}: {why} (sycl-tla can_implement: 16-byte "
            "contiguous extents)",
            field=f"dims.{name}",
        )


def gemm_alignment(m: int, n: int, k: int, layout: str, pair: Any, out: str, where: str) -> None:
    la, lb = LAYOUTS[layout]
    bits_out = 32 if out in ("f32", "s32") else 16
    if la == "row":
        _check_multiple(k, _align(pair.bits_a), "K", f"row-major A ({pair.a}) is contiguous in K", where)
    else:
        _check_multiple(m, _align(pair.bits_a), "M", f"column-major A ({pair.a}) is contiguous in M", where)
    if lb == "row":
        _check_multiple(n, _align(pair.bits_b), "N", f"row-major B ({pair.b}) is contiguous in N", where)
    else:
        _check_multiple(k, _align(pair.bits_b), "K", f"column-major B ({pair.b}) is contiguous in K", where)
    _check_multiple(n, _align(bits_out), "N", f"row-major D ({out}) is contiguous in N", where)


def _layout(dims: dict[str, Any], where: str) -> str:
    layout = str(dims.get("layout", "rr")).lower()
    if layout not in LAYOUTS:
        raise InputError(
            f"{where}: layout {dims.get('layout')!r} not in {', '.join(LAYOUTS)} (first letter A, second B; "
            "r = row-major, c = column-major; rr is x @ W)",
            field="dims.layout",
        )
    return layout


def validate_gemm(dims: dict[str, Any], dtype: Any, where: str) -> dict[str, Any]:
    _reject_unknown(dims, {"M", "N", "K", "layout", "out_dtype"}, where, "gemm")
    pair = dtypes.parse_pair(dtype, where)
    m, n, k = (_pos_int(dims, d, where, "gemm needs M, N, K") for d in ("M", "N", "K"))
    layout = _layout(dims, where)
    out = dtypes.output_dtype(pair, dims.get("out_dtype"), where)
    gemm_alignment(m, n, k, layout, pair, out, where)
    return {"M": m, "N": n, "K": k, "layout": layout, "dtype": pair.as_json(), "out_dtype": out}


def validate_grouped(dims: dict[str, Any], dtype: Any, where: str) -> dict[str, Any]:
    _reject_unknown(dims, {"M", "N", "K", "groups", "shapes", "layout", "out_dtype"}, where, "grouped_gemm")
    pair = dtypes.parse_pair(dtype, where)
    layout = _layout(dims, where)
    out = dtypes.output_dtype(pair, dims.get("out_dtype"), where)
    if "shapes" in dims:
        if any(d in dims for d in ("M", "N", "K", "groups")):
            raise InputError(f"{where}: give either shapes or M, N, K, groups, not both", field="dims.shapes")
        raw = dims["shapes"]
        if not isinstance(raw, list) or not raw:
            raise InputError(f"{where}: shapes must be a non-empty list of [M, N, K]", field="dims.shapes")
        shapes = []
        for i, s in enumerate(raw):
            if (
                not isinstance(s, (list, tuple))
                or len(s) != 3
                or any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in s)
            ):
                raise InputError(
                    f"{where}: shapes[{i}]={s!r} must be [M, N, K] of positive integers", field="dims.shapes"
                )
            shapes.append([int(v) for v in s])
    else:
        m, n, k = (
            _pos_int(dims, d, where, "grouped_gemm needs M, N, K, groups or shapes") for d in ("M", "N", "K")
        )
        groups = _pos_int(dims, "groups", where, "grouped_gemm needs M, N, K, groups or shapes")
        shapes = [[m, n, k] for _ in range(groups)]
    for i, (m, n, k) in enumerate(shapes):
        gemm_alignment(m, n, k, layout, pair, out, f"{where} (group {i})")
    # M, N, K: the element-wise largest group, for the target model's estimates and checks (every group's
    # own alignment was checked above; each max is some aligned group's extent, so it is aligned too).
    biggest = {d: max(s[i] for s in shapes) for i, d in enumerate(("M", "N", "K"))}
    return {
        "shapes": shapes,
        "groups": len(shapes),
        **biggest,
        "layout": layout,
        "dtype": pair.as_json(),
        "out_dtype": out,
    }


def tokens_split(total: int, experts: int, seed: int) -> list[int]:
    """A reproducible, skewed split of ``total`` tokens over ``experts`` (each within +-50 % of the mean,
    the largest expert absorbs the rounding), so experts see different token counts like real routing."""
    rng = random.Random(f"kernelpilot-moe-{experts}-{total}-{seed}")
    weights = [1.0 + rng.uniform(-0.5, 0.5) for _ in range(experts)]
    scale = total / sum(weights)
    tokens = [int(w * scale) for w in weights]
    tokens[max(range(experts), key=lambda i: weights[i])] += total - sum(tokens)
    return tokens


def validate_moe(dims: dict[str, Any], dtype: Any, where: str) -> dict[str, Any]:
    _reject_unknown(
        dims,
        {"N", "K", "num_experts", "total_tokens", "tokens_per_expert", "token_seed", "layout"},
        where,
        "moe_gemm",
    )
    if str(dims.get("layout", "rr")).lower() != "rr":
        raise InputError(
            f"{where}: layout {dims['layout']!r}: sycl-tla's MoE GEMM is row-major A, B and D (MoEGEMM<..., 'R', 'R', "
            "'R'>); allowed: rr",
            field="dims.layout",
        )
    pair = dtypes.parse_pair(dtype, where)
    if pair.a not in MOE_DTYPES or pair.b != pair.a:
        raise InputError(
            f"{where}: dtype {pair.label()}: sycl-tla's MoE GEMM takes 16-bit float A and B of one type "
            "(moe_gemms.hpp enable_if is_16_bit_fp_v); allowed: bf16, f16",
            field="dtype",
        )
    n = _pos_int(dims, "N", where, "moe_gemm needs N, K, num_experts, total_tokens")
    k = _pos_int(dims, "K", where, "moe_gemm needs N, K, num_experts, total_tokens")
    # Expert base pointers (e * N * K) and token offsets (rows * K, rows * N) must stay 64-byte aligned
    # for block-2D loads: N and K multiples of 32 16-bit elements.
    _check_multiple(n, 32, "N", "MoE expert and token base pointers must stay 64-byte aligned", where)
    _check_multiple(k, 32, "K", "MoE expert and token base pointers must stay 64-byte aligned", where)
    if "tokens_per_expert" in dims:
        raw = dims["tokens_per_expert"]
        if (
            not isinstance(raw, list)
            or not raw
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in raw)
        ):
            raise InputError(
                f"{where}: tokens_per_expert must be a non-empty list of non-negative integers",
                field="dims.tokens_per_expert",
            )
        tokens = [int(v) for v in raw]
        for name, value in (("num_experts", len(tokens)), ("total_tokens", sum(tokens))):
            if name in dims and dims[name] != value:
                raise InputError(
                    f"{where}: {name}={dims[name]} disagrees with tokens_per_expert ({value})",
                    field=f"dims.{name}",
                )
    else:
        experts = _pos_int(dims, "num_experts", where, "moe_gemm needs N, K, num_experts, total_tokens")
        total = _pos_int(dims, "total_tokens", where, "moe_gemm needs N, K, num_experts, total_tokens")
        seed = dims.get("token_seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise InputError(f"{where}: token_seed={seed!r} must be an integer", field="dims.token_seed")
        tokens = tokens_split(total, experts, seed)
    if sum(tokens) == 0:
        raise InputError(f"{where}: no tokens at all", field="dims.total_tokens")
    return {
        "N": n,
        "K": k,
        "num_experts": len(tokens),
        "total_tokens": sum(tokens),
        "tokens_per_expert": tokens,
        "dtype": pair.as_json(),
        "out_dtype": pair.a,
    }


FA_DIMS = {
    "head_dim",
    "head_dim_qk",
    "head_dim_vo",
    "batch",
    "num_heads_q",
    "num_heads_kv",
    "seq_qo",
    "seq_kv",
    "causal",
    "fa_mode",
    "persistent",
    "out_dtype",
}


def validate_fa(dims: dict[str, Any], dtype: Any, where: str, mode: str) -> dict[str, Any]:
    kind = f"fa_{mode}"
    _reject_unknown(dims, FA_DIMS, where, kind)
    pair = dtypes.parse_pair(dtype, where)
    if pair.a not in FA_DTYPES or pair.b != pair.a:
        raise InputError(
            f"{where}: dtype {pair.label()} for flash attention; allowed: {', '.join(FA_DTYPES)} (Q, K, V one type)",
            field="dtype",
        )
    fa_mode = dims.get("fa_mode", mode)
    if fa_mode != mode:
        raise InputError(
            f"{where}: fa_mode={fa_mode!r} but the kernel is {kind}; fa_mode must be {mode!r}",
            field="dims.fa_mode",
        )
    if "head_dim" in dims and ("head_dim_qk" in dims or "head_dim_vo" in dims):
        raise InputError(
            f"{where}: give head_dim or head_dim_qk/head_dim_vo, not both", field="dims.head_dim"
        )
    if "head_dim" in dims:
        dqk = dvo = _pos_int(dims, "head_dim", where, kind)
    else:
        dqk = _pos_int(dims, "head_dim_qk", where, f"{kind} needs head_dim (or head_dim_qk and head_dim_vo)")
        dvo = _pos_int(dims, "head_dim_vo", where, f"{kind} needs head_dim (or head_dim_qk and head_dim_vo)")
    batch = _pos_int(dims, "batch", where, kind)
    hq = _pos_int(dims, "num_heads_q", where, kind)
    hkv = _pos_int(dims, "num_heads_kv", where, kind, default=hq)  # absent = multi-head (not grouped)
    if hq % hkv:
        raise InputError(
            f"{where}: num_heads_q={hq} is not a multiple of num_heads_kv={hkv} (grouped-query attention shares "
            "each KV head among num_heads_q / num_heads_kv query heads)",
            field="dims.num_heads_kv",
        )
    seq_kv = _pos_int(dims, "seq_kv", where, kind)
    seq_qo = _pos_int(dims, "seq_qo", where, kind, default=1 if mode == "decode" else None)
    causal = _bool(dims, "causal", where)
    persistent = _bool(dims, "persistent", where)
    if persistent and mode != "decode":
        raise InputError(
            f"{where}: persistent=true needs fa_mode decode (XeFMHAFwdDynamicSplitKernel)",
            field="dims.persistent",
        )
    if persistent and causal:
        raise InputError(
            f"{where}: persistent=true with causal=true: sycl-tla's persistent kernel has no causal mask "
            "(static_assert in xe_fmha_fwd_runner.hpp)",
            field="dims.persistent",
        )
    if persistent and seq_qo != 1:
        raise InputError(
            f"{where}: persistent decode needs seq_qo=1, got {seq_qo} (can_implement)", field="dims.seq_qo"
        )
    align = _align(pair.bits_a)
    _check_multiple(dqk, align, "head_dim_qk", "Q and K rows are contiguous in the head dimension", where)
    _check_multiple(dvo, align, "head_dim_vo", "V and O rows are contiguous in the head dimension", where)
    out = dims.get("out_dtype", "f32")
    if out not in ("f32", "bf16", "f16"):
        raise InputError(f"{where}: out_dtype {out!r} not in f32, bf16, f16", field="dims.out_dtype")
    return {
        "batch": batch,
        "num_heads_q": hq,
        "num_heads_kv": hkv,
        "seq_qo": seq_qo,
        "seq_kv": seq_kv,
        "head_dim": dqk if dqk == dvo else None,
        "head_dim_qk": dqk,
        "head_dim_vo": dvo,
        "causal": causal,
        "persistent": persistent,
        "fa_mode": mode,
        "dtype": pair.as_json(),
        "out_dtype": out,
    }


def fa_flops(p: dict[str, Any]) -> float:
    """Useful flops, counting only unmasked scores (sycl-tla's runner convention for causal)."""
    sq, skv = p["seq_qo"], p["seq_kv"]
    offset = min(sq, skv)
    discard = sq - offset
    full_tile_offset = skv - offset
    eff_kv = full_tile_offset + (offset + 1) / 2.0 if p["causal"] else float(skv)
    eff_q = float(sq - discard) if p["causal"] else float(sq)
    return 2.0 * p["batch"] * p["num_heads_q"] * eff_q * eff_kv * (p["head_dim_qk"] + p["head_dim_vo"])
