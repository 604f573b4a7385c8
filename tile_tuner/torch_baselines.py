"""PyTorch paths a user would call instead of a tuned kernel, timed by the programs' rules.

Device-agnostic (``cuda``, ``xpu``, ``cpu``): ``torch.matmul`` is cuBLAS on CUDA and oneDNN on XPU, so
the CUDA and the Xe plugins' baseline workers share these functions and only choose what applies
(which SDPA backends to force, the problem's field names).  Each function returns
``{path name: {time_ms, iters, graph, buffers, ...} | {"skipped": why} | {"error": why}}``; the
worker reports the fastest (:func:`kernelpilot.tile_tuner.vendor_timing.result_line`).  Every path
is checked against a reference before it is timed (fp64 rows for GEMM, the per-group loop for
``torch._grouped_mm``, the first SDPA backend for the others).
"""

from __future__ import annotations

import contextlib
from typing import Any

from kernelpilot.tile_tuner.vendor_timing import Rule, rotating_sets, time_calls

GEMM_L2_BYTES = 2.5 * 60e6  # the GEMM programs' rotation (gemm_sm90.cu.j2: rotate_factor x l2_bytes)
GEMM_MAX_SETS = 64
KINDS_L2_BYTES = float(200 << 20)  # the grouped and FMHA programs' rotation
KINDS_MAX_SETS = 8
FP8 = {"e4m3": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "fp8_e5m2": "float8_e5m2"}


LIBRARY = {"cuda": "cublas", "xpu": "onednn"}  # what torch.matmul calls on each device


def _torch_dtype(name: str):
    import torch

    return {"bf16": torch.bfloat16, "f16": torch.float16}[name]


def _error(exc: BaseException) -> dict[str, str]:
    return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def gemm(problem: dict[str, Any], device: str, rule: Rule) -> dict[str, dict[str, Any]]:
    import torch

    m, n, k = problem["M"], problem["N"], problem["K"]
    dtype = str(problem.get("dtype", "bf16"))
    gen = torch.Generator(device=device).manual_seed(0)
    nb = rotating_sets(2.0 * (m * k + k * n + m * n), factor_bytes=GEMM_L2_BYTES, max_sets=GEMM_MAX_SETS)
    if dtype in FP8:
        if not hasattr(torch, "_scaled_mm"):
            return {"cublaslt:torch._scaled_mm": {"skipped": f"torch {torch.__version__} has no _scaled_mm"}}
        f8 = getattr(torch, FP8[dtype])
        a = [(torch.rand(m, k, device=device, generator=gen) * 2 - 1).to(f8) for _ in range(nb)]
        bt = [(torch.rand(n, k, device=device, generator=gen) * 2 - 1).to(f8) for _ in range(nb)]
        one = torch.ones((), device=device)
        fns = [(lambda i=i: torch._scaled_mm(a[i], bt[i].t(), one, one, out_dtype=torch.bfloat16))
               for i in range(nb)]  # fmt: skip
        try:
            return {"cublaslt:torch._scaled_mm": time_calls(fns, device, rule)}
        except Exception as exc:  # noqa: BLE001 - recorded as why this path did not run
            return {"cublaslt:torch._scaled_mm": _error(exc)}
    dt = _torch_dtype(dtype)
    a = [torch.rand(m, k, device=device, dtype=dt, generator=gen) * 2 - 1 for _ in range(nb)]
    if problem.get("layout", "rr") == "rc":  # B stored [N, K] (an nn.Linear weight), used transposed
        b = [(torch.rand(n, k, device=device, dtype=dt, generator=gen) * 2 - 1).t() for _ in range(nb)]
    else:
        b = [torch.rand(k, n, device=device, dtype=dt, generator=gen) * 2 - 1 for _ in range(nb)]
    c = [torch.empty(m, n, device=device, dtype=dt) for _ in range(nb)]
    rows = min(m, 64)
    ref = a[0][:rows].double() @ b[0].double()
    torch.matmul(a[0], b[0], out=c[0])
    rel = float((c[0][:rows].double() - ref).norm() / ref.norm().clamp_min(1e-30))
    fns = [(lambda i=i: torch.matmul(a[i], b[i], out=c[i])) for i in range(nb)]
    name = f"{LIBRARY.get(device, device)}:torch.matmul"
    try:
        return {name: {**time_calls(fns, device, rule), "rel_err_vs_fp64": rel}}
    except Exception as exc:  # noqa: BLE001
        return {name: _error(exc)}


def grouped(problem: dict[str, Any], device: str, rule: Rule) -> dict[str, dict[str, Any]]:
    """``groups`` [[M, N, K], ...]: A [M, K] row-major; B an nn.Linear weight [N, K] used transposed
    (layout ``rc``, the default) or [K, N] row-major (``rr``)."""
    import torch

    groups = [tuple(g) for g in problem["groups"] if g[0] > 0]
    dt = _torch_dtype(str(problem.get("dtype", "bf16")))
    gen = torch.Generator(device=device).manual_seed(0)
    nbytes = sum(2.0 * (m * k + n * k + m * n) for m, n, k in groups)
    nb = rotating_sets(nbytes, factor_bytes=KINDS_L2_BYTES, max_sets=KINDS_MAX_SETS)

    def rand(*shape):
        return torch.rand(*shape, device=device, dtype=dt, generator=gen) * 2 - 1

    rc = problem.get("layout", "rc") == "rc"
    sets = [
        ([rand(m, k) for m, n, k in groups], [rand(n, k) if rc else rand(k, n).t() for m, n, k in groups])
        for _ in range(nb)
    ]  # fmt: skip  (weights kept as [N, K] views either way)
    outs = [[torch.empty(m, n, device=device, dtype=dt) for m, n, k in groups] for _ in range(nb)]

    def loop(i: int):
        xs, ws = sets[i]
        return lambda: [torch.mm(x, w.t(), out=o) for x, w, o in zip(xs, ws, outs[i], strict=True)]

    out: dict[str, dict[str, Any]] = {}
    try:
        out["torch.mm loop"] = time_calls([loop(i) for i in range(nb)], device, rule)
    except Exception as exc:  # noqa: BLE001
        out["torch.mm loop"] = _error(exc)
    if len({(n, k) for _, n, k in groups}) != 1:
        out["torch._grouped_mm"] = {"skipped": "groups differ in N or K (torch._grouped_mm needs one N, K)"}
    elif not hasattr(torch, "_grouped_mm"):
        out["torch._grouped_mm"] = {"skipped": f"torch {torch.__version__} has no _grouped_mm"}
    else:
        offs = torch.tensor(np_cumsum([g[0] for g in groups]), device=device, dtype=torch.int32)
        packed = [(torch.cat(xs), torch.stack([w.contiguous() for w in ws])) for xs, ws in sets]
        try:
            y = torch._grouped_mm(packed[0][0], packed[0][1].transpose(-2, -1), offs=offs)
            loop(0)()
            ref = torch.cat(outs[0]).float()
            rel = float((y.float() - ref).norm() / ref.norm().clamp_min(1e-30))
            if not rel < 1e-2:
                raise ValueError(f"result differs from the torch.mm loop (rel err {rel:.3g})")
            fns = [(lambda x=x, w=w: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)) for x, w in packed]
            out["torch._grouped_mm"] = {**time_calls(fns, device, rule), "rel_err_vs_mm_loop": rel}
        except Exception as exc:  # noqa: BLE001
            out["torch._grouped_mm"] = _error(exc)
    return out


def np_cumsum(values: list[int]) -> list[int]:
    total, out = 0, []
    for v in values:
        total += v
        out.append(total)
    return out


SDPA_BACKENDS = ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION")


def attention(
    problem: dict[str, Any],
    device: str,
    rule: Rule,
    backends: tuple[str, ...] = SDPA_BACKENDS,
    flash_attn: bool = True,
) -> dict[str, dict[str, Any]]:
    """Q [B, Hq, Sq, D], K/V [B, Hkv, Skv, D]; causal masks are top-left aligned (Sq == Skv).

    ``backends``: the SDPA backends forced one at a time ("DEFAULT": torch's own choice, for devices
    whose backends are not the CUDA ones); ``flash_attn``: also try the FlashAttention package."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, hq, hkv = problem["batch"], problem["num_heads_q"], problem["num_heads_kv"]
    sq, skv, d, causal = problem["seq_qo"], problem["seq_kv"], problem["head_dim"], bool(problem["causal"])
    dt = _torch_dtype(str(problem.get("dtype", "bf16")))
    nbytes = 2.0 * (2 * b * hq * sq * d + 2 * b * hkv * skv * d)  # q, out, k, v
    nb = rotating_sets(nbytes, factor_bytes=KINDS_L2_BYTES, max_sets=KINDS_MAX_SETS)
    gen = torch.Generator(device=device).manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, device=device, dtype=dt, generator=gen)

    sets = [(randn(b, hq, sq, d), randn(b, hkv, skv, d), randn(b, hkv, skv, d)) for _ in range(nb)]
    out: dict[str, dict[str, Any]] = {}
    ref = None
    for name in backends:
        backend: Any = getattr(SDPBackend, name, None) if name != "DEFAULT" else contextlib.nullcontext
        key = f"sdpa:{name.lower()}"
        if backend is None:
            out[key] = {"skipped": f"torch {torch.__version__} has no SDPBackend.{name}"}
            continue
        variants = [(sets, hq != hkv, "enable_gqa")]
        if hq != hkv:  # a backend that refuses GQA gets K/V expanded to every head outside the timing
            g = hq // hkv
            expanded = [(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)) for q, k, v in sets]
            variants.append((expanded, False, f"K/V expanded to {hq} heads outside the timing"))
        errors = []
        for bufs, gqa, note in variants:
            try:
                with sdpa_kernel(backend) if name != "DEFAULT" else contextlib.nullcontext():
                    q, k, v = bufs[0]
                    y = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
                    if ref is None:
                        ref = y.float()
                    rel = float((y.float() - ref).norm() / ref.norm().clamp_min(1e-30))
                    if not rel < 2e-2:
                        raise ValueError(f"result differs from the first backend's (rel err {rel:.3g})")
                    fns = [(lambda x=x, gq=gqa: F.scaled_dot_product_attention(x[0], x[1], x[2], is_causal=causal,
                                                                               enable_gqa=gq))
                           for x in bufs]  # fmt: skip
                    out[key] = {**time_calls(fns, device, rule), "note": note}
                break
            except Exception as exc:  # noqa: BLE001 - this backend does not accept the problem
                errors.append(f"{note}: {_error(exc)['error']}")
        if key not in out:
            out[key] = {"error": " | ".join(errors)}
    if not flash_attn:
        return out
    try:
        from flash_attn import __version__ as fa_version
        from flash_attn import flash_attn_func
    except ImportError:
        out["flash_attn"] = {"skipped": "the flash_attn package is not installed"}
    else:
        try:
            bshd = [
                tuple(t.transpose(1, 2).contiguous() for t in s) for s in sets
            ]  # (B, S, H, D), GQA native
            calls = [(lambda x=x: flash_attn_func(*x, causal=causal)) for x in bshd]
            out["flash_attn"] = {**time_calls(calls, device, rule), "version": fa_version}
        except Exception as exc:  # noqa: BLE001
            out["flash_attn"] = _error(exc)
    return out
