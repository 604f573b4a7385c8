"""Independent check of one confirmed GEMM winner against cuBLAS: the same work timed three ways.

Why: the first check compared Nsight Compute *kernel* durations with the run's event timing; for a
stream-K winner the two disagreed by 8 %, because the run times every launch's whole work (the
stream-K workspace reset, a memset, plus the kernel, replayed from a CUDA graph) and ncu's kernel
durations count the kernel alone.  Here both sides are measured the way the run measures them:

  run        the confirmation path itself (``tile_tuner.confirm.confirm``): R interleaved rounds of
             fresh program runs and of the cuBLAS worker, medians; the program once with the
             per-launch reset of template v3 (CUTLASS's ``initialize_workspace``: barrier counters
             only) and once with ``--workspace_reset=full`` (v2: the whole workspace);
  ncu graph  ``ncu --graph-profiling graph``: each timed CUDA graph is one profiled workload, so its
             duration holds every node (memsets and kernels) the events of the run hold;
             per launch = graph duration / launches in the graph, on both sides (the cuBLAS worker's
             graph replays are selected through an NVTX range around ``CUDAGraph.replay``); the
             program gets the run's graph length (``--iters``, from the rounds): ncu leaves the GPU
             idle between workloads and its clock drops (345 MHz seen), so both graphs must be
             ~10 ms long for the ramp to weigh the same;
  ncu kernel the old check (kernel durations only), to show what the graph adds.

Writes ``crosscheck.json`` and the raw ncu CSVs (``ncu_*.csv``) into --out.  On the GPU machine,
after the winner's binary is in --cache (a CPU prebuild with ``--build`` is a cache hit there)::

    python3 benchmarks/confirm_crosscheck_h200.py --cache CACHE --out OUT
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PROBLEM = {"M": 2048, "N": 7168, "K": 18432, "layout": "rr"}
# the confirmed winner of m2048_n7168_k18432 in benchmarks/results/confirm_h200_run_gemm.json
CONFIG = {"kernel": "gemm", "dtype": "bf16", "tile": [256, 128, 64], "cluster": [1, 1],
          "schedule": "cooperative", "epilogue": "tma", "stages": 0, "tile_scheduler": "streamk"}  # fmt: skip
VARIANT = {"raster": "H", "swizzle": 1, "decomp": "K", "splits": 1}
PROGRAM_KERNELS = ("fill_uniform", "fill_nan", "reference_rows", "device_kernel")
TOLERANCE = 0.03

# the cuBLAS worker of the run, unchanged, with an NVTX range around every graph replay so that ncu
# profiles exactly the timed graphs (and the untimed upload replay, the same graph)
VENDOR_UNDER_NCU = r"""
import sys, torch
_replay = torch.cuda.CUDAGraph.replay
def replay(self):
    torch.cuda.nvtx.range_push("kp_timed")
    try:
        return _replay(self)
    finally:
        torch.cuda.nvtx.range_pop()
torch.cuda.CUDAGraph.replay = replay
from kernelpilot.dsl_plugins.cuda.vendor_worker import main
sys.exit(main(sys.argv[1:]))
"""


def kernel_and_problem():
    from kernelpilot.dsl_plugins.cuda.gemm import CutlassSm90Gemm

    kernel = CutlassSm90Gemm()
    return kernel, kernel.validate_problem(dict(PROBLEM), "bf16", "crosscheck")


def build_item(kernel: Any, problem: dict[str, Any]):
    from kernelpilot.tile_tuner.builder import BuildItem

    recipe = kernel.build_recipe("sm90", {})
    return recipe, BuildItem.create(kernel.render(CONFIG, problem, "sm90"), recipe, kernel.template_version,
                                    "crosscheck")  # fmt: skip


def build(cache: Path, work: Path, jobs: int) -> Path:
    """The winner's binary in ``cache`` (built here when missing)."""
    from kernelpilot.tile_tuner.builder import BuildCache, build_batch

    kernel, problem = kernel_and_problem()
    recipe, item = build_item(kernel, problem)
    out = build_batch([item], recipe, BuildCache(cache), work, jobs=jobs)[item.cache_key]
    if out.binary is None:
        raise SystemExit(f"build of the winner failed: {out.status} {out.message}")
    return out.binary


def parse_ncu(text: str) -> list[dict[str, Any]]:
    """Rows of ncu's CSV (``--csv``): name, duration in ms, NVTX columns kept as they are."""
    scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = []
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", "")) * scale.get(row.get("Metric Unit", ""), 1e-6)
        rows.append({"name": row.get("Kernel Name", ""), "ms": value})
    return rows


def program_json(text: str) -> dict[str, Any] | None:
    """The program's (or the worker's) one result line inside ncu's output."""
    for ln in text.splitlines():
        if ln.startswith("{") and '"status"' in ln:
            return json.loads(ln)
    return None


def ncu(argv: list[str], extra: list[str], csv_out: Path, timeout_s: float) -> tuple[str, float]:
    cmd = ["ncu", "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv", *extra, *argv]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        text = p.stdout + "\n# stderr\n" + p.stderr[-4000:]
    except (OSError, subprocess.TimeoutExpired) as exc:
        text = f"# failed: {type(exc).__name__}: {exc}"
    csv_out.write_text("# " + " ".join(cmd) + "\n" + text)
    return text, time.time() - t0


def tuned_graph(text: str) -> dict[str, Any]:
    """Per launch from the program's graph workloads (ncu names them ``graph``)."""
    rows = parse_ncu(text)
    graphs = [r["ms"] for r in rows if not any(k in r["name"] for k in PROGRAM_KERNELS)]
    res = program_json(text) or {}
    v = next((x for x in res.get("variants", []) if x.get("status") == "ok"), {})
    iters = v.get("iters")
    out: dict[str, Any] = {"graphs": len(graphs), "graph_ms": graphs, "iters": iters,
                           "program_status": res.get("status"), "program_ms": (v.get("time_ms") or {}).get("median"),
                           "workspace_reset": res.get("workspace_reset"),
                           "names": sorted({r["name"][:60] for r in rows})}  # fmt: skip
    if graphs and iters:
        out["per_launch_ms"] = statistics.median(graphs) / iters
    return out


def tuned_kernels(text: str) -> dict[str, Any]:
    rows = [r["ms"] for r in parse_ncu(text) if "device_kernel" in r["name"]]
    return {"kernels": len(rows), "median_ms": statistics.median(rows) if rows else None}


def vendor_iters(text: str) -> int | None:
    res = program_json(text) or {}
    cands = [c for c in (res.get("candidates") or {}).values() if isinstance(c, dict) and c.get("iters")]
    return cands[0]["iters"] if cands else None


def vendor_graph(text: str) -> dict[str, Any]:
    graphs = [r["ms"] for r in parse_ncu(text)]
    iters = vendor_iters(text)
    out: dict[str, Any] = {"graphs": len(graphs), "graph_ms": graphs, "iters": iters}
    if graphs and iters:
        out["per_launch_ms"] = statistics.median(graphs) / iters
    return out


def vendor_kernels(text: str) -> dict[str, Any]:
    """Every kernel of every graph replay in the NVTX range: per call = their sum / (replays x iters),
    replays = the timed repetitions + the untimed upload replay (cuBLAS may use more than one kernel
    per product, which the sum keeps)."""
    rows = parse_ncu(text)
    res = program_json(text) or {}
    iters = vendor_iters(text)
    replays = int((res.get("timing") or {}).get("reps", 5)) + 1
    out: dict[str, Any] = {"kernels": len(rows), "names": sorted({r["name"][:60] for r in rows}),
                           "iters": iters, "replays": replays}  # fmt: skip
    if rows and iters:
        out["per_call_ms"] = sum(r["ms"] for r in rows) / (replays * iters)
        out["median_kernel_ms"] = statistics.median(r["ms"] for r in rows)
    return out


def run_rounds(binary: Path, rounds: int, timeout_s: float) -> dict[str, Any]:
    """The confirmation path: interleaved fresh runs of the program (both resets) and the worker."""
    from kernelpilot.tile_tuner.baseline import VendorPool, plan_for
    from kernelpilot.tile_tuner.confirm import ConfirmOptions, Contender, confirm
    from kernelpilot.tile_tuner.runner import run_program

    kernel, problem = kernel_and_problem()
    argv, env = kernel.run_command(binary, problem, {"variants": [VARIANT]})

    def run(extra: list[str]):
        def go():
            out = run_program([*argv, *extra], env, timeout_s)
            return out.status, out.message, out.raw or None, out.seconds

        return go

    contenders = [
        Contender(label="v3 reset (CUTLASS initialize_workspace)", role="finalist", run=run([])),
        Contender(label="v2 reset (whole workspace)", role="finalist", run=run(["--workspace_reset=full"])),
    ]
    plan = plan_for(kernel, problem, "sm90", {})
    pool = VendorPool(timeout_s)
    try:
        doc = confirm(contenders, plan, lambda: pool.measure(plan), ConfirmOptions(rounds=rounds))
    finally:
        pool.close()
    raw = contenders[0].last_raw or {}
    iters = next((v.get("iters") for v in raw.get("variants", []) if v.get("status") == "ok"), None)
    return {"doc": doc, "argv": argv, "vendor_argv": list(plan.argv), "iters": iters}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/kp_crosscheck")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--ncu", default="graph,graph_full,kernels,vendor_kernels",
                    help="ncu measurements besides the vendor graphs (always): graph, graph_full, kernels, "
                    "vendor_kernels")  # fmt: skip
    ap.add_argument("--build", action="store_true", help="only build the winner into --cache (any machine)")
    args = ap.parse_args()
    cache, out, work = Path(args.cache), Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    binary = build(cache, work, args.jobs)
    if args.build:
        print(binary)
        return 0
    t0 = time.time()
    rec: dict[str, Any] = {"what": "independent check of the run's vs-vendor on one stream-K GEMM winner",
                           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "command": " ".join([sys.executable, *sys.argv]),
                           "problem": PROBLEM, "config": CONFIG, "variant": VARIANT}  # fmt: skip
    rounds = run_rounds(binary, args.rounds, 120.0)
    doc = rounds["doc"]
    by = {r["label"]: r for r in doc["finalists"]}
    v3, v2 = by["v3 reset (CUTLASS initialize_workspace)"], by["v2 reset (whole workspace)"]
    vendor = doc["vendor"]
    rec["run"] = {"rounds": {r["label"]: r["rounds_ms"] for r in [*doc["finalists"], vendor]},
                  "v3_ms": v3["confirmed_ms"], "v2_ms": v2["confirmed_ms"], "vendor_ms": vendor.get("confirmed_ms"),
                  "calls": doc["calls"]}  # fmt: skip
    if shutil.which("ncu") is None:
        rec["ncu"] = {"error": "ncu not on PATH"}
    else:
        # the run's own graph length: under ncu every warm-up launch is slowed, so the program's own
        # estimate would shrink the graph to 3 launches, which then run partly at the clocks the GPU
        # drops to while ncu works between workloads (seen: 0.79 ms per launch against 0.71)
        fixed = [f"--iters={rounds['iters']}"] if rounds.get("iters") else []
        argv, what = [*rounds["argv"], *fixed], set(args.ncu.split(","))
        rec["ncu_program_iters"] = rounds.get("iters")
        nc: dict[str, Any] = {}
        walls: dict[str, float] = {}
        graph = ["--graph-profiling", "graph"]
        if "graph" in what:
            text, walls["graph"] = ncu(argv, graph, out / "ncu_tuned_graph.csv", 180)
            nc["tuned_graph_v3"] = tuned_graph(text)
        if "graph_full" in what:
            text, walls["graph_full"] = ncu([*argv, "--workspace_reset=full"], graph,
                                            out / "ncu_tuned_graph_fullreset.csv", 180)  # fmt: skip
            nc["tuned_graph_v2"] = tuned_graph(text)
        if "kernels" in what:
            kfilter = ["-k", "regex:device_kernel", "--launch-count", "40"]
            text, walls["kernels"] = ncu(argv, kfilter, out / "ncu_tuned_kernels.csv", 180)
            nc["tuned_kernels"] = tuned_kernels(text)
        script = work / "vendor_under_ncu.py"
        script.write_text(VENDOR_UNDER_NCU)
        vargv = [sys.executable, str(script), *rounds["vendor_argv"][3:]]  # drop "python -m module"
        nvtx = ["--nvtx", "--nvtx-include", "kp_timed/"]
        text, walls["vendor_graph"] = ncu(vargv, [*graph, *nvtx], out / "ncu_vendor_graph.csv", 180)
        nc["vendor_graph"] = vendor_graph(text)
        if "vendor_kernels" in what:
            text, walls["vendor_kernels"] = ncu(vargv, nvtx, out / "ncu_vendor_kernels.csv", 180)
            nc["vendor_kernels"] = vendor_kernels(text)
        rec["ncu"] = {**nc, "wall_s": {k: round(v, 1) for k, v in walls.items()}}
    n = rec.get("ncu", {})
    ratios: dict[str, Any] = {}
    run = rec["run"]
    if run["vendor_ms"]:
        ratios["run_v3"] = run["vendor_ms"] / run["v3_ms"] if run["v3_ms"] else None
        ratios["run_v2"] = run["vendor_ms"] / run["v2_ms"] if run["v2_ms"] else None
    vg = (n.get("vendor_graph") or {}).get("per_launch_ms")
    for key, name in (("tuned_graph_v3", "ncu_graph_v3"), ("tuned_graph_v2", "ncu_graph_v2")):
        tg = (n.get(key) or {}).get("per_launch_ms")
        ratios[name] = vg / tg if (vg and tg) else None
    vk, tk = (
        (n.get("vendor_kernels") or {}).get("per_call_ms"),
        (n.get("tuned_kernels") or {}).get("median_ms"),
    )
    ratios["ncu_kernels"] = vk / tk if (vk and tk) else None
    rec["vs_vendor"] = ratios
    checks = {}
    for run_key, ncu_key in (("run_v3", "ncu_graph_v3"), ("run_v2", "ncu_graph_v2")):
        a, b = ratios.get(run_key), ratios.get(ncu_key)
        checks[f"{run_key}_vs_{ncu_key}"] = {"difference": (b / a - 1.0) if (a and b) else None,
                                             "agrees_within_3pct": (abs(b / a - 1.0) <= TOLERANCE) if (a and b) else None}  # fmt: skip
    rec["checks"] = checks
    rec["wall_s"] = round(time.time() - t0, 1)
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds of this check and of everything it ran (programs, worker, ncu): what it can have taken
    # from work running beside it (e.g. a cold run's compiles)
    rec["cpu_s"] = round(me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, 1)
    (out / "crosscheck.json").write_text(json.dumps(rec, indent=1, default=str))
    print(json.dumps({"run": {k: v for k, v in run.items() if k != "calls"}, "vs_vendor": ratios, "checks": checks},
                     indent=1, default=str))  # fmt: skip
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
