"""Compile-check the swap-AB grouped / MoE family on a CPU: build, read ptxas, compare with the model.

Each config is rendered by the grouped program (``kernelpilot.dsl_plugins.cuda.grouped_gemm``) and built
through the tuner's own build path (CMake + ninja, the tuner's nvcc flags, a content-addressed cache),
then its ptxas output is read for the GEMM kernel entry: spill bytes, registers, the WGMMA atom CUTLASS
picked (``MMA_64xNx16``: N must be the tile's N, or the tile runs as several narrow WGMMAs) and the
mainloop stage count (``MainloopSm90ArrayTmaGmmaWarpSpecialized<Stages, ...>``) next to the model's
prediction.  No GPU is needed.  Writes ``--out`` (default
benchmarks/results/swap_grouped_compile_check.json)::

    python benchmarks/swap_grouped_compile_check.py [--cache DIR] [--jobs 2] [--out FILE]

CUTLASS headers: ``CUTLASS_DIR``, ``./.deps/cutlass`` or an installed ``nvidia-cutlass`` wheel.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

from hw_models_sm90_compile_check import parse_log  # the ptxas -v reader of the dense compile check

from kernelpilot.hw_models.sm90.gemm import auto_stages
from kernelpilot.targets import get_target_model
from kernelpilot.tile_tuner.builder import BuildCache, BuildItem, build_batch
from kernelpilot.tile_tuner.kernels import get_tile_kernel
from kernelpilot.toolchain import tool_version

REPO = Path(__file__).resolve().parents[1]
# Mixtral-8x7B down (benchmarks/cuda_kinds_common.py): the problem the configs are rendered for (the
# binary does not depend on it: group shapes are run-time arguments)
PROBLEM = {"tokens": 4096, "experts": 8, "top_k": 2, "N": 4096, "K": 14336, "proj": "down"}
# every token-side width of the family, with the tile Ms and schedules its rules leave
CONFIGS = [
    *(
        {"tile": [128, n, 64], "cluster": [1, 1], "schedule": "cooperative"}
        for n in (144, 160, 176, 208, 224, 240)
    ),
    {"tile": [256, 144, 64], "cluster": [1, 1], "schedule": "cooperative"},
    {"tile": [256, 176, 64], "cluster": [2, 1], "schedule": "cooperative"},
    {"tile": [128, 176, 64], "cluster": [2, 1], "schedule": "pingpong"},
    {"tile": [64, 240, 64], "cluster": [1, 1], "schedule": "pingpong"},
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", default="/tmp/kp-swap-compile-cache", help="build cache (reused when present)")
    ap.add_argument("--work", default="/tmp/kp-swap-compile-work")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument(
        "--out", type=Path, default=REPO / "benchmarks" / "results" / "swap_grouped_compile_check.json"
    )
    args = ap.parse_args()
    model = get_target_model("sm90")
    kernel = get_tile_kernel("moe_gemm", "sm90")
    problem = kernel.validate_problem(dict(PROBLEM), "bf16", "swap_grouped_compile_check")
    recipe = kernel.build_recipe("sm90", {})
    cfgs = [
        model.parse_config({"kernel": "moe_gemm", "dtype": "bf16", "swap_ab": True, **c}) for c in CONFIGS
    ]
    items = [BuildItem.create(kernel.render(c, problem, "sm90"), recipe, kernel.template_version, "swap-check")
             for c in cfgs]  # fmt: skip
    Path(args.work).mkdir(parents=True, exist_ok=True)
    start = time.time()
    cache = BuildCache(Path(args.cache))
    built = build_batch(items, recipe, cache, Path(args.work), jobs=args.jobs)
    rows = []
    for cfg, item in zip(cfgs, items, strict=True):
        outcome = built[item.cache_key]
        log = Path(args.cache) / item.cache_key / "build.log"
        parsed = parse_log(log.read_text(errors="replace")) if log.exists() else {}
        check = model.check(cfg, problem)
        rows.append({
            "label": cfg.label(),
            "config": cfg.as_dict(),
            "model_valid": check.valid,
            "model_warnings": [w.rule for w in check.warnings],
            "model_predicted_stages": auto_stages(cfg),
            "build_status": outcome.status,
            "build_message": (outcome.message or "")[-400:],
            "cutlass_stages": parsed.get("stages"),
            "wgmma_atoms_n": parsed.get("wgmma_atoms", []),
            "ptxas_spill_bytes": parsed.get("spill_bytes"),
            "ptxas_registers": parsed.get("registers"),
        })  # fmt: skip
        print(json.dumps(rows[-1]))
    bad = [r["label"] for r in rows if r["build_status"] not in ("built", "cached")
           or r["ptxas_spill_bytes"] or r["wgmma_atoms_n"] != [r["config"]["tile"][1]]
           or r["cutlass_stages"] != r["model_predicted_stages"]]  # fmt: skip
    record = {
        "what": "the swap-AB grouped family compiled for sm_90a on a CPU (no GPU run): build status, ptxas spills "
        "and registers, the WGMMA atom CUTLASS picked and its stage count against the model",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": "CPU build machine (2 cores), no GPU",
        "nvcc": tool_version("nvcc"),
        "library": recipe.library_version,
        "command": "python benchmarks/swap_grouped_compile_check.py " + " ".join(sys.argv[1:]),
        "wall_s": round(time.time() - start, 1),
        "disagreements": bad,
        "results": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}: {len(rows)} configs, {len(bad)} disagreements {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
