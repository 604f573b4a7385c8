"""Element-wise comparison of a candidate's outputs with the oracle's.

``|out - ref| <= atol + rtol * |ref|`` in float64 on every element; elements still holding the poison
of :mod:`.poison` are reported as never written rather than as wrong values.
"""

from __future__ import annotations

from typing import Any


def flatten(torch: Any, out: Any) -> list[Any]:
    """Every tensor of a forward result (tensor, nested list/tuple/dict, or Python number)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        items = []
        for o in out:
            items.extend(flatten(torch, o))
        return items
    if isinstance(out, dict):
        return flatten(torch, list(out.values()))
    if isinstance(out, (int, float)):
        return [torch.tensor(out)]
    raise TypeError(f"forward returned {type(out).__name__}; expected tensors")


def compare(torch: Any, got: Any, ref: Any, rtol: float, atol: float) -> dict[str, Any]:
    """Element-wise check of every output; reports the worst errors and unwritten (poisoned) elements."""
    got_list, ref_list = flatten(torch, got), flatten(torch, ref)
    if len(got_list) != len(ref_list):
        return {
            "ok": False,
            "message": f"forward returned {len(got_list)} tensors, the oracle {len(ref_list)}",
        }
    max_abs = 0.0
    max_rel = 0.0
    problems = []
    for i, (g, r) in enumerate(zip(got_list, ref_list, strict=True)):
        if tuple(g.shape) != tuple(r.shape):
            problems.append(f"output {i}: shape {tuple(g.shape)} != oracle {tuple(r.shape)}")
            continue
        g64 = g.detach().to("cpu", torch.float64)
        r64 = r.detach().to("cpu", torch.float64)
        ref_nan = torch.isnan(r64)
        unwritten = int((torch.isnan(g64) & ~ref_nan).sum())
        if not g.dtype.is_floating_point and g.dtype != torch.bool:
            sentinel = torch.iinfo(g.dtype).max
            unwritten = max(0, int((g.to("cpu") == sentinel).sum()) - int((r.to("cpu") == sentinel).sum()))
        diff = (g64 - r64).abs()
        diff = torch.where(ref_nan & torch.isnan(g64), torch.zeros_like(diff), diff)
        finite = torch.isfinite(diff)
        if finite.any():
            max_abs = max(max_abs, float(diff[finite].max()))
            rel = diff[finite] / r64[finite].abs().clamp_min(1e-30)
            max_rel = max(max_rel, float(rel.max()))
        bad = ~(diff <= atol + rtol * r64.abs())
        bad &= ~(ref_nan & torch.isnan(g64))
        nbad = int(bad.sum())
        if unwritten > 0:
            problems.append(f"output {i}: {unwritten} of {g.numel()} elements never written (still poisoned)")
        elif nbad:
            idx = int(bad.flatten().nonzero()[0])
            problems.append(
                f"output {i}: {nbad} of {g.numel()} elements outside rtol={rtol} atol={atol}; "
                f"first at flat index {idx}: got {float(g64.flatten()[idx])!r}, expected {float(r64.flatten()[idx])!r}"
            )
    return {
        "ok": not problems,
        "message": "; ".join(problems) if problems else "matches the oracle",
        "max_abs_error": max_abs,
        "max_rel_error": max_rel,
    }


def output_bytes(torch: Any, out: Any) -> int:
    """Bytes of every tensor a forward returned (the bandwidth estimate when the spec gives none)."""
    return sum(t.numel() * t.element_size() for t in flatten(torch, out))
