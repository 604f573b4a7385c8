"""Size of the legal tile space of a (target, kernel, dtype[, problem]) and its best points by the cost model.

``--dims`` takes the problem's dims by name: GEMM ``M=..,N=..,K=..[,batch=..]``; grouped GEMM
``M=..,N=..,K=..,groups=G``; MoE ``num_experts=..,total_tokens=..,N=..,K=..``; attention
``batch=..,num_heads_q=..,num_heads_kv=..,seq_qo=..,seq_kv=..,head_dim=..,causal=1``.  Without dims
the problem-level rules are skipped and only the size is printed (ranking needs a problem).
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", required=True, help="target model name: bmg, pvc, xe2_igpu, sm90 ...")
    parser.add_argument("--kernel", required=True, help="gemm, grouped_gemm, moe_gemm, fa_prefill, fa_decode")
    parser.add_argument(
        "--dtype", required=True, help="bf16, f16 (fp16), tf32, s8, e4m3 ... or A:B for mixed inputs"
    )
    parser.add_argument("--dims", default=None, help="problem dims, e.g. M=4096,N=4096,K=4096")
    parser.add_argument("--layout", default=None, help="operand layouts A then B: rr (default), rc, cr, cc")
    parser.add_argument(
        "--device", default=None, help="catalogue device for the cost model (default: the target's)"
    )
    parser.add_argument("--top", type=int, default=10, help="how many top configs to show (default 10)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def parse_dims(text: str | None) -> dict[str, Any]:
    from kernelpilot.errors import InputError

    dims: dict[str, Any] = {}
    if not text:
        return dims
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise InputError(f"--dims: {part!r} is not NAME=VALUE", field="dims")
        key, value = (s.strip() for s in part.split("=", 1))
        if key == "causal":
            if value.lower() not in ("0", "1", "true", "false"):
                raise InputError(f"--dims: causal must be 0/1/true/false, got {value!r}", field="dims")
            dims[key] = value.lower() in ("1", "true")
            continue
        try:
            dims[key] = int(value)
        except ValueError as exc:
            raise InputError(f"--dims: {key}={value!r} is not an integer", field="dims") from exc
    return dims


def _dtype_arg(text: str) -> Any:
    if ":" in text:
        a, b = text.split(":", 1)
        return {"a": a, "b": b}
    return text


def run(args: argparse.Namespace) -> int:
    from kernelpilot.errors import InputError
    from kernelpilot.hw_models.dtypes import parse_dtype
    from kernelpilot.hw_models.problems import attention_flops, gemm_flops
    from kernelpilot.targets import get_target_model

    model = get_target_model(args.target)
    model.check_kernel(args.kernel, "--kernel")
    dtype = parse_dtype(_dtype_arg(args.dtype), "--dtype")
    if args.top < 0:
        raise InputError("--top must be >= 0", field="top")
    dims = parse_dims(args.dims)
    if args.layout and not dims:
        raise InputError("--layout selects problem-level rules and needs --dims", field="layout")
    problem: dict[str, Any] | None = None
    if dims:
        problem = {**dims, "dtype": dtype.as_json()}
        if args.layout:
            problem["layout"] = args.layout
    device = model.device(args.device)

    configs = list(model.enumerate(args.kernel, dtype.as_json(), problem))
    flops = None
    ranked: list[tuple[float, Any]] = []
    default_entry = None
    if dims:
        assert problem is not None  # built from dims above
        flops = (
            attention_flops(problem) if args.kernel.startswith("fa_") else gemm_flops(problem, args.kernel)
        )
        ranked = sorted(
            ((model.estimate_time_s(c, problem, device), c) for c in configs),
            key=lambda t: (t[0], t[1].label()),
        )
        try:
            default = model.default_config(args.kernel, dtype.as_json(), problem)
            t = model.estimate_time_s(default, problem, device)
            default_entry = {
                "label": default.label(),
                "config": default.as_dict(),
                "valid": model.check(default, problem).valid,
                "estimate_s": t,
                "tflops": flops / t / 1e12,
            }
        except InputError:
            default_entry = None

    top = [
        {
            "rank": i + 1,
            "label": c.label(),
            "config": c.as_dict(),
            "estimate_s": t,
            "tflops": (flops / t / 1e12) if flops else None,
        }
        for i, (t, c) in enumerate(ranked[: args.top])
    ]
    if args.json:
        print(
            json.dumps(
                {
                    "target": model.name,
                    "device": device.key,
                    "kernel": args.kernel,
                    "dtype": dtype.as_json(),
                    "problem": problem,
                    "space_size": len(configs),
                    "default": default_entry,
                    "top": top,
                },
                indent=2,
            )
        )
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    console.print(
        f"{model.name} {args.kernel} {dtype.label()}: {len(configs)} legal configs"
        + (f" for {dims}" if dims else " (no dims: problem-level rules not applied)")
    )
    if not dims:
        console.print("give --dims to rank the space with the cost model")
        return 0
    table = Table(title=f"top {len(top)} by the cost model on {device.name} (estimates, not measurements)")
    for col in ("rank", "config", "est. time (us)", "est. TFLOP/s"):
        table.add_column(col)
    for row in top:
        table.add_row(
            str(row["rank"]), row["label"], f"{row['estimate_s'] * 1e6:.1f}", f"{row['tflops']:.1f}"
        )
    console.print(table)
    if default_entry:
        console.print(
            f"library default {default_entry['label']}: est. {default_entry['estimate_s'] * 1e6:.1f} us, "
            f"{default_entry['tflops']:.1f} TFLOP/s"
        )
    return 0
