"""SM clock and power draw of a confirmed grouped / MoE winner and of the ``torch.mm`` loop it lost to.

Why: on the workloads of few large GEMMs every grouped config runs at 663-677 TFLOP/s on an H100 where
a per-group ``torch.mm`` loop (cuBLAS) reaches 767 (``docs/tile_tuner.md``).  A power-capped GPU lowers
its clock under tensor-core load, so two kernels doing the same FLOPs can differ by their energy per
FLOP as much as by their schedule.  This runs each side for a few seconds of back-to-back launches
while ``nvidia-smi`` samples the clock, the power draw and the active clock-event reasons every 100 ms,
and records the medians beside each side's own time per call: the same clock on both sides points at
the schedule, a lower clock on the tuned side at its power.

The winner is read from a tuner run document (``run_kinds.json`` of ``benchmarks/kinds_default_h200.sh``)
and built into ``--cache`` (a cache hit where the call's prebuilt cache was extracted).  On a GPU
machine, from the repository root after ``source benchmarks/device_setup.sh``::

    python3 benchmarks/grouped_load_probe.py --runs RUN_KINDS.json --workloads mixtral_8x7b_down \\
        --cache /tmp/kp_cache --out OUT.json

``--plan`` (any machine) resolves the workloads and builds the winners, and runs nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SMI_FIELDS = "clocks.sm,power.draw,clocks_event_reasons.active"


def winners(run_kinds: dict[str, Any], names: set[str]) -> dict[str, dict[str, Any]]:
    """Each named workload's kernel kind, source dims and confirmed winner (config + runtime)."""
    found: dict[str, dict[str, Any]] = {}
    for doc in run_kinds.values():
        for w in doc.get("workloads", []):
            if w["name"] in names and w.get("best"):
                source = {k: v for k, v in w["dims"]["source"].items() if k != "kind"}
                found[w["name"]] = {"kernel": w["kernel"], "dims": source, "dtype": w["dtype"],
                                    "config": w["best"]["config"], "runtime": w["best"].get("runtime", {}),
                                    "recorded_ms": w["best"].get("confirmed_ms") or w["best"]["time_ms"]}  # fmt: skip
    missing = names - found.keys()
    if missing:
        sys.exit(f"--workloads: no confirmed winner in the run document for {sorted(missing)}")
    return found


def build_winner(spec: dict[str, Any], cache: Path, work: Path) -> tuple[Any, dict[str, Any], Path]:
    """(kernel, validated problem, binary) of one winner; built into ``cache`` when missing."""
    from kernelpilot.tile_tuner.builder import BuildCache, BuildItem, build_batch
    from kernelpilot.tile_tuner.kernels import get_tile_kernel

    kernel = get_tile_kernel(spec["kernel"], "sm90")
    problem = kernel.validate_problem(dict(spec["dims"]), spec["dtype"], "--runs")
    recipe = kernel.build_recipe("sm90", {})
    item = BuildItem.create(
        kernel.render(spec["config"], problem, "sm90"), recipe, kernel.template_version, "probe"
    )
    out = build_batch([item], recipe, BuildCache(cache), work, jobs=16)[item.cache_key]
    if out.binary is None:
        sys.exit(f"build of {spec['config']} failed: {out.status} {out.message}")
    return kernel, problem, out.binary


class Sampler:
    """``nvidia-smi -lms 100`` in the background; ``stop()`` returns the medians of what it saw."""

    def __init__(self) -> None:
        query = ["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits", "-lms", "100"]
        self.proc = subprocess.Popen(query, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def stop(self) -> dict[str, Any]:
        self.proc.terminate()
        text, _ = self.proc.communicate(timeout=10)
        rows = [ln.split(",") for ln in text.splitlines() if ln.count(",") == 2]
        # the busy samples: the first and last ones catch the ramp and the idle tail
        busy = [r for r in rows if float(r[1]) > 150.0] if rows else []
        if not busy:
            return {"samples": len(rows), "error": text[-300:]}
        reasons: dict[str, int] = {}
        for r in busy:
            reasons[r[2].strip()] = reasons.get(r[2].strip(), 0) + 1
        return {"samples": len(busy), "sm_mhz_median": statistics.median(float(r[0]) for r in busy),
                "power_w_median": statistics.median(float(r[1]) for r in busy), "clock_event_reasons": reasons}  # fmt: skip


def tuned_under_load(kernel: Any, problem: dict[str, Any], binary: Path, runtime: dict[str, Any], seconds: float,
                     recorded_ms: float) -> dict[str, Any]:  # fmt: skip
    from kernelpilot.tile_tuner.runner import run_program

    iters = max(20, int(seconds * 1e3 / recorded_ms))
    variant = {"raster": runtime.get("raster", "M"), "swizzle": runtime.get("swizzle", 1)}
    argv, env = kernel.run_command(
        binary, problem, {"variants": [variant], "iters": iters, "reps": 1, "warmup": 20}
    )
    time.sleep(2.0)  # the same rested start as the other side
    sampler = Sampler()
    out = run_program(argv, env, 120.0)
    smi = sampler.stop()
    timed = (out.raw or {}).get("time_ms") or {}
    return {"argv": [Path(argv[0]).name, *argv[1:]], "status": out.status, "message": out.message,
            "ms_per_call": timed.get("median"), "iters": iters, **smi}  # fmt: skip


def loop_under_load(groups: list[list[int]], seconds: float) -> dict[str, Any]:
    import torch

    a = [(torch.rand(m, k, device="cuda", dtype=torch.bfloat16) * 2 - 1) for m, n, k in groups if m]
    b = [(torch.rand(n, k, device="cuda", dtype=torch.bfloat16) * 2 - 1).t() for m, n, k in groups if m]

    def loop() -> None:
        for x, y in zip(a, b, strict=True):
            torch.mm(x, y)

    for _ in range(5):
        loop()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    loop()
    end.record()
    torch.cuda.synchronize()
    calls = max(20, int(seconds * 1e3 / start.elapsed_time(end)))
    time.sleep(2.0)
    sampler = Sampler()
    start.record()
    for _ in range(calls):
        loop()
    end.record()
    torch.cuda.synchronize()
    smi = sampler.stop()
    return {"ms_per_call": start.elapsed_time(end) / calls, "calls": calls, **smi}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", required=True, help="run_kinds.json of a grouped / MoE kinds call")
    ap.add_argument("--workloads", required=True, help="comma-separated workload names")
    ap.add_argument("--cache", required=True, help="build cache (the call's prebuilt cache, extracted)")
    ap.add_argument("--work", default="/tmp/kp_load_probe")
    ap.add_argument("--seconds", type=float, default=3.0, help="back-to-back launches per side")
    ap.add_argument("--out", required=True)
    ap.add_argument("--plan", action="store_true", help="resolve and build only; run nothing")
    args = ap.parse_args()
    with open(args.runs) as f:
        specs = winners(json.load(f), set(args.workloads.split(",")))
    Path(args.work).mkdir(parents=True, exist_ok=True)
    built = {name: build_winner(spec, Path(args.cache), Path(args.work)) for name, spec in specs.items()}
    if args.plan:
        print(
            json.dumps(
                {n: {"config": s["config"], "binary": str(built[n][2])} for n, s in specs.items()}, indent=1
            )
        )
        return
    import torch

    rec: dict[str, Any] = {
        "what": "SM clock and power under load: confirmed grouped winner vs the torch.mm loop, nvidia-smi every 100 ms",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(sys.argv),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "workloads": {},
    }
    for name, spec in specs.items():
        kernel, problem, binary = built[name]
        tuned = tuned_under_load(kernel, problem, binary, spec["runtime"], args.seconds, spec["recorded_ms"])
        vendor = loop_under_load(problem["groups"], args.seconds)
        rec["workloads"][name] = {"config": spec["config"], "runtime": spec["runtime"], "recorded_ms": spec["recorded_ms"],
                                  "tuned": tuned, "torch_mm_loop": vendor}  # fmt: skip
    with open(args.out, "w") as f:
        json.dump(rec, f, indent=1)
    print(json.dumps(rec, indent=1))


if __name__ == "__main__":
    main()
