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

import sys
from typing import Any

from pergroup_mixed_probe import probe_main, workload_problem

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
    probe_main(__doc__, BASES, configs_for, "/tmp/kp_fused_probe")


if __name__ == "__main__":
    main()
