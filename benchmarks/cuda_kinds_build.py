"""Render and build every candidate program of the CUDA kinds benchmark with the tuner's builder.

Usage (CPU machine with nvcc; ``KERNELPILOT_BUILD_LOCK`` optionally serializes builds of several
processes, one config per lock hold)::

    CUTLASS_DIR=.deps/cutlass KERNELPILOT_BUILD_LOCK=/tmp/kp-nvcc.lock \\
        python benchmarks/cuda_kinds_build.py --cache .kp-cache/cuda_kinds --jobs 1 --one-at-a-time

On the GPU machine (16 cores) the same command without the lock builds what the cache lacks in
parallel.  Builds go through ``kernelpilot.tile_tuner.builder`` (CMake + ninja, content-addressed
cache), so a config built here is a cache hit there when nvcc and CUTLASS versions match.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cuda_kinds_common as common  # noqa: E402

from kernelpilot.tile_tuner.builder import BuildCache, BuildItem, build_batch  # noqa: E402


def plan() -> list[tuple[str, str, Any, BuildItem, dict[str, Any]]]:
    """(kind, label, config, build item, one problem) for every program the benchmark needs."""
    probs = common.problems()
    ks = common.kernels()
    out = []
    _, gemm_cands = common.gemm_candidates(probs)
    gk = ks["grouped_gemm"]
    recipe = gk.build_recipe("sm90", {})
    any_problem = next(iter(probs["grouped_gemm"].values()))
    for cfg in gemm_cands:
        prog = gk.render(cfg, any_problem, "sm90")
        item = BuildItem.create(prog, recipe, gk.template_version, label=prog.target_name)
        out.append(("grouped_gemm", prog.target_name, cfg, item, any_problem))
    for kind in ("fa_prefill", "fa_decode"):
        k = ks[kind]
        recipe_fa = k.build_recipe("sm90", {})
        seen = set()
        for problem in probs[kind].values():
            key = (problem["head_dim"], problem["causal"])
            if key in seen:
                continue
            seen.add(key)
            for cfg in common.fmha_candidates(kind, problem["head_dim"]):
                prog = k.render(cfg, problem, "sm90")
                item = BuildItem.create(prog, recipe_fa, k.template_version, label=prog.target_name)
                out.append((kind, prog.target_name, cfg, item, problem))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=".kp-cache/cuda_kinds")
    ap.add_argument("--work", default="/tmp/kp_cuda_kinds_build")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument(
        "--one-at-a-time", action="store_true", help="one build_batch call per program (short lock holds)"
    )
    ap.add_argument("--only", default="", help="comma list of kinds to build, in this order")
    ap.add_argument("--labels", default="", help="comma list of program labels to build, in this order")
    args = ap.parse_args()
    cache = BuildCache(args.cache)
    items = plan()
    if args.only:  # also the build order
        order = args.only.split(",")
        items = sorted((x for x in items if x[0] in order), key=lambda x: order.index(x[0]))
    if args.labels:  # also the build order
        wanted = args.labels.split(",")
        items = sorted((x for x in items if x[1] in wanted), key=lambda x: wanted.index(x[1]))
    ks = common.kernels()
    summary = []
    t0 = time.time()
    batches: dict[str, list] = {}
    for kind, label, _cfg, item, _problem in items:
        batches.setdefault(kind, []).append((kind, label, item))
    for entries in batches.values():
        kind0 = entries[0][0]
        recipe = ks[kind0].build_recipe("sm90", {})
        chunks = [[e] for e in entries] if args.one_at_a_time else [entries]
        for chunk in chunks:
            outcomes = build_batch([e[2] for e in chunk], recipe, cache, Path(args.work), jobs=args.jobs)
            for kind, label, item in chunk:
                o = outcomes[item.cache_key]
                summary.append(
                    {
                        "kind": kind,
                        "label": label,
                        "key": item.cache_key,
                        "status": o.status,
                        "message": o.message,
                    }
                )
                print(f"{time.time() - t0:7.1f}s {o.status:12s} {label} {o.message[:200]}", flush=True)
    Path(args.cache, "manifest.json").write_text(json.dumps(summary, indent=1))
    bad = [s for s in summary if s["status"] not in ("built", "cached")]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
