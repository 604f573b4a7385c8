"""The fused-groups launch (the dense kernel's body over every group in one persistent launch) against the
same tile as CUTLASS's ptr-array grouped kernel, the best configs of earlier runs and a torch.mm loop, side
by side on the rows of few large GEMMs.

Why: on one group holding all of a workload's rows, the ptr-array kernel took 1.07-1.19x the dense
kernel's time with the same tile (benchmarks/results/grouped_vs_dense_h100.json,
grouped_vs_dense_swz_h200.json), and the dense kernel there beat one cuBLAS call; launched once per group
the dense kernel pays a ramp and a last partial wave per group.  The fused launch
(cpp_templates/cuda/fused_groups_gemm_sm90.hpp) keeps the dense kernel's collectives and descriptors in
the kernel parameters, and walks every group's tiles in one persistent grid.  Per workload the probe times
the configs below in ``--rounds`` interleaved rounds with the loop (each program with its best run-time
variant of the first round; every run passes the program's own check, partial tiles and poisoned outputs
included), with the helpers of benchmarks/pergroup_mixed_probe.py.

On a GPU machine, from the repository root after ``source benchmarks/device_setup.sh``::

    python3 benchmarks/fused_groups_probe.py --cache /tmp/kp_cache --out OUT.json

``--plan`` (any machine with nvcc) builds the programs into ``--cache`` and runs nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import Any

from pergroup_mixed_probe import _gpu_name, build, measure, workload_problem

FUSED = {"launch": "fused"}
PG2 = {"launch": "per_group", "streams": 2}
# Per workload: fused tiles (the dense winners' 128x256 and 256x128 shapes, with and without a cluster),
# the same 128x256 tile as a ptr-array launch, and the fastest configs of the earlier H100 records.
BASES: dict[str, list[dict[str, Any]]] = {
    "llama3_8b_mlp_up_varlen8": [
        {"tile": [128, 256, 64], "cluster": [1, 1], **FUSED},
        {"tile": [128, 256, 64], "cluster": [1, 2], **FUSED},
        {"tile": [256, 128, 64], "cluster": [2, 1], **FUSED},
        {"tile": [128, 256, 64], "cluster": [1, 1]},
        {"tile": [128, 192, 64], "cluster": [1, 2], "schedule": "pingpong", **PG2},
    ],
    "qwen3_8b_mlp_down_varlen16": [
        {"tile": [128, 256, 64], "cluster": [1, 1], **FUSED},
        {"tile": [128, 256, 64], "cluster": [1, 2], **FUSED},
        {"tile": [256, 128, 64], "cluster": [2, 1], **FUSED},
        {"tile": [128, 256, 64], "cluster": [1, 1]},
        {"tile": [256, 176, 64], "cluster": [2, 1], "swap_ab": True, "extra_tile_n": [160]},
    ],
    "mixtral_8x7b_down": [
        {"tile": [128, 256, 64], "cluster": [1, 1], **FUSED},
        {"tile": [128, 256, 64], "cluster": [1, 2], **FUSED},
        {"tile": [256, 128, 64], "cluster": [2, 1], **FUSED},
        {"tile": [128, 256, 64], "cluster": [1, 1]},
        {"tile": [256, 176, 64], "cluster": [1, 2], "swap_ab": True},
    ],
    "phi3_medium_qkv_varlen16": [
        {"tile": [128, 256, 64], "cluster": [1, 1], **FUSED},
        {"tile": [128, 256, 64], "cluster": [1, 2], **FUSED},
        {"tile": [128, 256, 64], "cluster": [1, 1]},
        {"tile": [256, 176, 64], "cluster": [1, 1], "swap_ab": True, "extra_tile_n": [160, 128]},
    ],
}  # fmt: skip


def configs_for(name: str) -> tuple[str, dict[str, Any], list[Any]]:
    """The workload's kind, problem and configs, each checked by the sm90 model."""
    from kernelpilot.targets import get_target_model

    model = get_target_model("sm90")
    kind, problem = workload_problem(name)
    out = []
    for raw in BASES[name]:
        cfg = model.parse_config({"kernel": kind, "dtype": "bf16", "schedule": "cooperative", **raw})
        res = model.check(cfg, problem)
        if not res.valid:
            sys.exit(f"{name}: {cfg.label()} is illegal: {[v.message for v in res.violations]}")
        out.append(cfg)
    return kind, problem, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", required=True, help="build cache (content-addressed: a CPU prebuild is a hit)")
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--work", default="/tmp/kp_fused_probe")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--out", required=True)
    ap.add_argument("--plan", action="store_true", help="build only; run nothing")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(BASES)
    Path(args.work).mkdir(parents=True, exist_ok=True)
    specs = {n: configs_for(n) for n in names}
    built = {
        n: build(k, p, cs, Path(args.cache), Path(args.work), args.jobs) for n, (k, p, cs) in specs.items()
    }
    if args.plan:
        print(json.dumps({n: [c.label() for c in cs] for n, (_, _, cs) in specs.items()}, indent=1))
        return
    import torch

    rec: dict[str, Any] = {
        "what": __doc__.split("\n\n")[0],
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(sys.argv),
        "device": _gpu_name(),
        "torch": torch.__version__,
        "rounds": args.rounds,
        "workloads": {},
    }
    # written after each workload: a call cut short keeps what it measured
    for n, (k, p, cs) in specs.items():
        rec["workloads"][n] = measure(n, k, p, cs, built[n], args.rounds)
        Path(args.out).write_text(json.dumps(rec, indent=1))
    print(json.dumps({n: [(r["config"], round(r["median_ms"], 4), round(r["loop_over_config"], 3)) for r in w["configs"]]
                      for n, w in rec["workloads"].items()}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
