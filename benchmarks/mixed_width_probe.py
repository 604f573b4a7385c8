"""Where a mixed-width grouped program's time goes: each width's launch alone, against the whole program
and against its single-width twin on the same groups.

Why: a mixed-width config (``extra_tile_n``, ``docs/hw_models.md``) runs one ptr-array launch per token-side
width, each over the groups that width pads least.  The cost model prices it as the sum of per-width
launches, each with its own last wave.  On Qwen3-30B-A3B down (128 experts of 204-299 tokens, K = 768) the
mixed 256x144 + 128 computed 6 % fewer rows than its single-width twin and still ran slower, so either
the launches cost more than their sum (a per-launch cost) or the narrower tile is not faster per row on
that short K loop.  The program skips empty groups and launches no kernel for a width left without
groups, so zeroing the other widths' token counts times one width's launch by itself, with the same
binary, buffers and run-time variant.

Per workload, from a results store of a tuner run (``store_moe_gemm.sqlite`` / ``store_grouped_gemm.sqlite``
of ``benchmarks/kinds_default_h200.sh``): the fastest measured mixed config and its single-width twin
(the same config without ``extra_tile_n``, built here when the run did not measure it), each on all groups and on each width's groups alone, in
``--rounds`` interleaved rounds; medians, the cost model's estimate of every cell, and two derived ratios:

* ``launch_overhead_ms``: the whole mixed program minus the sum of its per-width launches;
* ``narrow_over_twin``: a width's launch against the twin's tile on the same groups (below 1: the
  narrower tile is faster there).

On a GPU machine, from the repository root after ``source benchmarks/device_setup.sh``::

    python3 benchmarks/mixed_width_probe.py --store STORE.sqlite [--store ...] --cache /tmp/kp_cache --out OUT.json

``--plan`` (any machine) picks the configs and builds the programs into ``--cache``, and runs nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sqlite3
import statistics
import sys
from pathlib import Path
from typing import Any


def pick(store: Path, only: set[str] | None) -> list[dict[str, Any]]:
    """Per problem of the store: the fastest measured mixed config and its single-width twin (run with the
    twin's best measured variant, or the mixed config's where the run did not measure the twin)."""
    from kernelpilot.targets import get_target_model

    model = get_target_model("sm90")
    rows = sqlite3.connect(store).execute(
        "select kernel, problem, config_key, runtime, time_ms from measurements where status = 'ok'"
    )
    per_problem: dict[str, dict[Any, tuple[float, dict[str, Any]]]] = {}
    kinds: dict[str, str] = {}
    for kernel, problem, config_key, runtime, time_ms in rows:
        cfg = model.parse_config(json.loads(config_key))
        per_problem.setdefault(problem, {})[cfg] = (time_ms, json.loads(runtime or "{}"))
        kinds[problem] = kernel
    picked = []
    for problem, measured in per_problem.items():
        mixed = [c for c in measured if c.extra_tile_n]
        if not mixed:
            continue
        best = min(mixed, key=lambda c: measured[c][0])
        twin = best.model_copy(update={"extra_tile_n": ()})  # measured here too, when the run did not
        prob = json.loads(problem)
        name = f"{kinds[problem]}_n{prob['groups'][0][1]}_k{prob['groups'][0][2]}_g{len(prob['groups'])}"
        if only and name not in only:
            continue
        picked.append({"name": name, "kernel": kinds[problem], "problem": prob,
                       "mixed": best, "twin": twin, "runtime": measured[best][1],
                       "twin_runtime": measured.get(twin, measured[best])[1]})  # fmt: skip
    return picked


def width_subsets(problem: dict[str, Any], widths: tuple[int, ...]) -> dict[int, dict[str, Any]]:
    """One problem per width: the groups that width runs keep their tokens, the others get 0 (skipped)."""
    from kernelpilot.hw_models.sm90.token_widths import width_for_tokens

    out = {}
    for w in widths:
        groups = [[m if m and width_for_tokens(m, widths) == w else 0, n, k] for m, n, k in problem["groups"]]
        if any(m for m, _, _ in groups):
            out[w] = {**problem, "groups": groups}
            if "tokens" in problem:  # a MoE problem's per-expert token counts (what the cost model reads)
                out[w]["tokens"] = [m for m, _, _ in groups]
    return out


def build(spec: dict[str, Any], cache: Path, work: Path) -> dict[str, Path]:
    from kernelpilot.tile_tuner.builder import BuildCache, BuildItem, build_batch
    from kernelpilot.tile_tuner.kernels import get_tile_kernel

    kernel = get_tile_kernel(spec["kernel"], "sm90")
    recipe = kernel.build_recipe("sm90", {})
    items = {
        role: BuildItem.create(
            kernel.render(spec[role].model_dump(mode="json"), spec["problem"], "sm90"),
            recipe,
            kernel.template_version,
            role,
        )
        for role in ("mixed", "twin")
    }
    outcomes = build_batch(list(items.values()), recipe, BuildCache(cache), work, jobs=16)
    binaries = {}
    for role, item in items.items():
        out = outcomes[item.cache_key]
        if out.binary is None:
            sys.exit(f"build of {spec[role].label()} failed: {out.status} {out.message}")
        binaries[role] = out.binary
    return binaries


def measure(spec: dict[str, Any], binaries: dict[str, Path], rounds: int) -> dict[str, Any]:
    from kernelpilot.hw_models.catalogue import get_device
    from kernelpilot.hw_models.sm90.cost import sm90_time_s
    from kernelpilot.tile_tuner.kernels import get_tile_kernel
    from kernelpilot.tile_tuner.runner import run_program

    kernel = get_tile_kernel(spec["kernel"], "sm90")
    device = get_device("h200" if "H200" in _gpu_name() else "h100_sxm")
    subsets = width_subsets(spec["problem"], spec["mixed"].token_widths)
    cells = [("mixed", "all", spec["problem"])] + [("mixed", w, p) for w, p in subsets.items()]
    cells += [("twin", "all", spec["problem"])] + [("twin", w, p) for w, p in subsets.items()]
    times: dict[tuple[str, Any], list[float]] = {(r, g): [] for r, g, _ in cells}
    for _ in range(rounds):
        for role, groups, problem in cells:
            rt = spec["runtime"] if role == "mixed" else spec["twin_runtime"]
            variant = {"raster": rt.get("raster", "M"), "swizzle": rt.get("swizzle", 1)}
            argv, env = kernel.run_command(binaries[role], problem, {"variants": [variant]})
            out = run_program(argv, env, 120.0)
            if out.status != "ok":
                sys.exit(f"{spec[role].label()} on groups {groups}: {out.status} {out.message}")
            times[(role, groups)].append(out.raw["time_ms"]["median"])
    result: dict[str, Any] = {"mixed": spec["mixed"].label(), "twin": spec["twin"].label(),
                              "groups_per_width": {w: sum(1 for m, _, _ in p["groups"] if m) for w, p in subsets.items()},
                              "cells": []}  # fmt: skip
    med = {key: statistics.median(v) for key, v in times.items()}
    for role, groups, problem in cells:
        # a validated grouped problem holds no empty group (the model refuses M = 0); a MoE one's tokens may be 0
        nonempty = {**problem, "groups": [g for g in problem["groups"] if g[0]]}
        est = sm90_time_s(spec[role], nonempty, device) * 1e3
        result["cells"].append({"config": role, "groups": groups, "median_ms": med[(role, groups)],
                                "rounds_ms": times[(role, groups)], "model_ms": est})  # fmt: skip
    widths = list(subsets)
    result["launch_overhead_ms"] = med[("mixed", "all")] - sum(med[("mixed", w)] for w in widths)
    result["twin_split_overhead_ms"] = med[("twin", "all")] - sum(med[("twin", w)] for w in widths)
    result["narrow_over_twin"] = {w: med[("mixed", w)] / med[("twin", w)] for w in widths}
    result["mixed_over_twin"] = med[("mixed", "all")] / med[("twin", "all")]
    return result


def _gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--store",
        required=True,
        action="append",
        help="results store of a grouped / MoE tuner run (repeatable)",
    )
    ap.add_argument("--cache", required=True, help="build cache (the call's prebuilt cache, extracted)")
    ap.add_argument("--only", default="", help="comma-separated names (as --plan prints them)")
    ap.add_argument("--work", default="/tmp/kp_mixed_probe")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", required=True)
    ap.add_argument("--plan", action="store_true", help="pick and build only; run nothing")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    specs = [spec for store in args.store for spec in pick(Path(store), only)]
    if not specs:
        sys.exit(f"--store {args.store}: no problem with a measured mixed-width config")
    Path(args.work).mkdir(parents=True, exist_ok=True)
    built = {s["name"]: build(s, Path(args.cache), Path(args.work)) for s in specs}
    if args.plan:
        print(json.dumps({s["name"]: [s["mixed"].label(), s["twin"].label()] for s in specs}, indent=1))
        return
    rec: dict[str, Any] = {
        "what": __doc__.split("\n\n")[0],
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(sys.argv),
        "device": _gpu_name(),
        "rounds": args.rounds,
        "workloads": {},
    }
    for spec in specs:  # written after each workload: a call cut short keeps what it measured
        rec["workloads"][spec["name"]] = measure(spec, built[spec["name"]], args.rounds)
        Path(args.out).write_text(json.dumps(rec, indent=1))
    print(json.dumps(rec, indent=1))


if __name__ == "__main__":
    main()
