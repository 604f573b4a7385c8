"""Which cuBLAS kernels a per-group ``torch.mm`` loop launches for the grouped / MoE workloads of a run.

Why: where a confirmed CUTLASS winner loses to a ``torch.mm`` loop, the kernel the vendor picked (its
tile, stages and cluster are in the name) says which family the space lacks.  Reads the group shapes
from a tuner run document (``run_kinds.json`` of ``benchmarks/kinds_default_h200.sh``), runs each
group's ``torch.mm`` under ``torch.profiler`` on uniform [-1, 1) bf16 data (the run's vendor worker's
data) and records, per workload, every kernel name with its count and median device time, plus the
loop's total.  The profiled reps are short, so they run at the unthrottled clock: the kernel choice is
the result, not the times (``grouped_load_probe.py`` measures under sustained load).  On a GPU machine::

    python3 benchmarks/vendor_kernels_probe.py --runs RUN_KINDS.json --workloads a,b --out OUT.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from typing import Any


def group_shapes(run_kinds: dict[str, Any], names: set[str]) -> dict[str, list[tuple[int, int, int]]]:
    """(M, N, K) of every non-empty group of the named workloads, from each phase's run document."""
    shapes: dict[str, list[tuple[int, int, int]]] = {}
    for doc in run_kinds.values():
        for w in doc.get("workloads", []):
            if w["name"] in names:
                shapes[w["name"]] = [tuple(g) for g in w["dims"]["groups"] if g[0] > 0]
    missing = names - shapes.keys()
    if missing:
        sys.exit(f"--workloads: not in the run document: {sorted(missing)}")
    return shapes


def probe(groups: list[tuple[int, int, int]], reps: int) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    a = [(torch.rand(m, k, device="cuda", dtype=torch.bfloat16) * 2 - 1) for m, n, k in groups]
    b = [(torch.rand(n, k, device="cuda", dtype=torch.bfloat16) * 2 - 1).t() for m, n, k in groups]
    for _ in range(3):
        for x, y in zip(a, b, strict=True):
            torch.mm(x, y)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            for x, y in zip(a, b, strict=True):
                torch.mm(x, y)
        torch.cuda.synchronize()
    kernels: dict[str, list[float]] = {}
    for ev in prof.events():
        if ev.device_type.name == "CUDA":
            kernels.setdefault(ev.name, []).append(ev.device_time_total / 1e3)
    flops = sum(2.0 * m * n * k for m, n, k in groups)
    per_loop_ms = sum(sum(v) for v in kernels.values()) / reps
    return {
        "groups": len(groups),
        "kernels": {k: {"count": len(v), "median_ms": statistics.median(v)} for k, v in kernels.items()},
        "loop_kernel_ms": per_loop_ms,
        "loop_tflops": flops / per_loop_ms / 1e9,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", required=True, help="run_kinds.json of a grouped / MoE kinds call")
    ap.add_argument("--workloads", required=True, help="comma-separated workload names")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import torch

    with open(args.runs) as f:
        shapes = group_shapes(json.load(f), set(args.workloads.split(",")))
    rec = {
        "what": "cuBLAS kernels of a per-group torch.mm loop (torch.profiler device times)",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(sys.argv),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "workloads": {name: probe(groups, args.reps) for name, groups in shapes.items()},
    }
    with open(args.out, "w") as f:
        json.dump(rec, f, indent=1)
    print(json.dumps(rec, indent=1))


if __name__ == "__main__":
    main()
