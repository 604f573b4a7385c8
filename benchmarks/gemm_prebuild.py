"""Build CUTLASS sm90 GEMM configs into a build cache on a machine without a GPU.

Why: the build cache is content-addressed (rendered source, flags, compiler and CUTLASS versions; not
paths), so binaries built here with the same nvcc as the GPU machine are cache hits there and its
scarce time goes to benchmarks.  Usage::

    CUTLASS_DIR=/tmp/cutlass python benchmarks/gemm_prebuild.py --cache .kp-cache --jobs 2 \
        --skinny --results benchmarks/results/gemm_h200_results.json

``--skinny`` / ``--swap-ab`` add the configs of ``gemm_h200.py``'s ``skinny`` / ``swap`` phases (the
ground-truth filter over the tile N 16/32 and the swap-AB families of (16, 4096, 14336));
``--results`` adds each shape's recorded best config and the library default.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from pathlib import Path

from gemm_h200 import GT_PHASES  # the same filters as the device run's exhaustive phases

from kernelpilot.dsl_plugins.cuda.gemm import CutlassSm90Gemm
from kernelpilot.hw_models.sm90.model import Sm90Model
from kernelpilot.tile_tuner.builder import BuildCache, BuildItem, build_batch
from kernelpilot.tile_tuner.space import SearchSpace

SKINNY = {"M": 16, "N": 4096, "K": 14336, "dtype": "bf16", "layout": "rr"}


def phase_configs(phase: str) -> list[dict]:
    """The configs a ``gemm_h200.py`` exhaustive phase measures on (16, 4096, 14336), best-ranked first
    (builds are binary-identical for every shape, so one shape names them all)."""
    space = SearchSpace(
        model=Sm90Model(), kernel="gemm", dtype="bf16", problem=SKINNY, space_filter=GT_PHASES[phase][1]
    )
    return [c.as_dict() for c in space.ranked()]


def recorded_best(results: Path, store: Path) -> list[dict]:
    """Configs named as best per shape in a results JSON, looked up by label in the replay store."""
    per_shape = json.loads(results.read_text())["per_shape"]
    labels = {s["tuned"]["label"] for s in per_shape} | {per_shape[0]["library_default"]["label"]}
    out, seen = [], set()
    with sqlite3.connect(store) as db:
        for (res,) in db.execute("select result from measurements"):
            cfg = json.loads(res)["config"]
            c = Sm90Model().as_config({"kernel": "gemm", "dtype": "bf16", **cfg})
            if c.label() in labels and c.label() not in seen:
                seen.add(c.label())
                out.append(c.as_dict())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", required=True)
    ap.add_argument("--work", default="/tmp/kp-prebuild")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--skinny", action="store_true", help="the configs of gemm_h200.py's skinny phase")
    ap.add_argument("--swap-ab", action="store_true", help="the configs of gemm_h200.py's swap phase")
    ap.add_argument("--results", type=Path)
    ap.add_argument("--store", type=Path, default=Path("tests/data/replay/h200_gemm_bf16.sqlite"))
    ap.add_argument("--extra", action="append", default=[], help="config JSON")
    args = ap.parse_args()
    configs: list[dict] = []
    if args.results:
        configs += recorded_best(args.results, args.store)
    configs += [json.loads(e) for e in args.extra]
    for phase, wanted in (("skinny", args.skinny), ("swap", args.swap_ab)):
        if wanted:
            configs += phase_configs(phase)
    kernel = CutlassSm90Gemm()
    recipe = kernel.build_recipe("sm90", {})
    cache = BuildCache(args.cache)
    items = [
        BuildItem.create(kernel.render(c, SKINNY, "sm90"), recipe, kernel.template_version, "")
        for c in configs
    ]
    for start in range(0, len(items), args.jobs):  # chunks: an interrupted prebuild keeps what it built
        chunk = items[start : start + args.jobs]
        t0 = time.time()
        outcomes = build_batch(chunk, recipe, cache, Path(args.work), jobs=args.jobs)
        for cfg, item in zip(configs[start : start + args.jobs], chunk, strict=True):
            status = outcomes[item.cache_key].status
            print(json.dumps({"config": cfg, "status": status, "s": round(time.time() - t0, 1)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
