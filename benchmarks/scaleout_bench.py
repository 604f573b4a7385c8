"""Scale-out evidence (issues 8 and 9): the same GEMM batch through different executors, side by side.

Every run is a real ``kernelpilot tune BATCH --json`` subprocess with its own results store; the wall
time is measured around the whole command (process start, cluster start, builds, benchmarks), and the
run JSON's ``executor`` block splits it into time with a build in flight and time with a benchmark in
flight.  The batch uses the ``random`` proposer with a fixed seed and no patience, so the configs each
workload measures do not depend on timings: two runs must try exactly the same configs, and only the
best config may differ, by measured noise (reported with the times).

Modes (run from the repository root; on the device use the .sh wrappers, which install the carried
wheels and unpack the CUTLASS headers first):

``h200``  one GPU: cold -- ``--cluster local`` then in-process, each with an EMPTY build cache (a real
          batch: builds and benchmarks); warm -- ``--reps`` alternating pairs on the full cache, fresh
          stores (only benchmarks plus the executors' fixed costs).  Target: the cluster run costs
          <= 10 % extra wall time and gives the same results.
``2gpu``  phases ``1gpu`` (``--gpus 0``), ``2gpu`` (``--gpus 0,1``), ``cluster1`` (``--cluster local
          --gpus 0``), ``cluster2`` (``--cluster local --gpus 0,1``), each with a COLD build cache;
          pick phases with ``--phases`` to keep each run under 10 minutes; ``merge`` combines the
          per-phase files.

CPU rehearsal (no GPU, no compiler): add ``--replay STORE`` and ``--gpus-override 0,1``; everything
runs through the replay backend and the result file is marked ``"rehearsal": true``.

    python benchmarks/scaleout_bench.py h200 --out benchmarks/results
    python benchmarks/scaleout_bench.py 2gpu --phases 1gpu,2gpu --out $OUT
    python benchmarks/scaleout_bench.py merge --mode 2gpu --out benchmarks/results A.json B.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# the tile tuner's ten H200 GEMM shapes (benchmarks/gemm_h200.py; bf16, row-major A[M,K] @ B[K,N]); the first N are used
SHAPES = [
    ("m8192_n6144_k4096", 8192, 6144, 4096),
    ("sq4096", 4096, 4096, 4096),
    ("m4096_n8192_k8192", 4096, 8192, 8192),
    ("sq8192", 8192, 8192, 8192),
    ("m8192_n4096_k14336", 8192, 4096, 14336),
    ("m8192_n28672_k4096", 8192, 28672, 4096),
    ("sq3000", 3000, 3000, 3000),
    ("m64_n28672_k4096", 64, 28672, 4096),
    ("sq1024", 1024, 1024, 1024),
    ("m16_n4096_k14336", 16, 4096, 14336),
]
PHASES_2GPU = {
    "1gpu": ["--gpus", "0"],
    "2gpu": ["--gpus", "0,1"],
    "cluster1": ["--cluster", "local", "--gpus", "0"],
    "cluster2": ["--cluster", "local", "--gpus", "0,1"],
}


def store_shapes(replay: str) -> list[tuple[str, int, int, int]]:
    """Rehearsal: the GEMM shapes a replay store covers (so every config asked for is recorded)."""
    from kernelpilot.tile_tuner.store import ResultsStore

    store = ResultsStore(replay, readonly=True)
    dims = [json.loads(p) for p in store.problems("sm90", "gemm", "bf16")]
    store.close()
    return [(f"m{d['M']}_n{d['N']}_k{d['K']}", d["M"], d["N"], d["K"]) for d in dims]


def write_batch(path: Path, n: int, budget: int, seed: int, replay: str | None = None) -> list[str]:
    import yaml

    shapes = (store_shapes(replay) if replay else SHAPES)[:n]
    doc = {
        "target": "sm90",
        "defaults": {"kernel": "gemm", "dtype": "bf16", "layout": "rr", "proposer": "random",
                     "budget_configs": budget, "seed": seed},
        "workloads": [{"name": name, "dims": {"M": m, "N": nn, "K": k}} for name, m, nn, k in shapes],
    }  # fmt: skip
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return [s[0] for s in shapes]


def versions() -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform()}
    for mod in ("dask", "distributed", "torch"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - informational
            out[mod] = None
    try:
        out["kernelpilot_commit"] = (
            subprocess.run(
                ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO, timeout=10
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.TimeoutExpired):
        out["kernelpilot_commit"] = None
    nvcc = shutil.which("nvcc")
    if nvcc:
        text = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
        out["nvcc"] = text[-1] if text else None
    smi = shutil.which("nvidia-smi")
    if smi:
        q = subprocess.run([smi, "--query-gpu=index,name,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True).stdout.strip()  # fmt: skip
        out["gpus"] = [ln.strip() for ln in q.splitlines() if ln.strip()]
    out["cpu_count"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return out


def tune(
    batch: Path, work: Path, name: str, cache: Path, flags: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    """One ``kernelpilot tune`` run; returns wall time, the executor's split and the comparable results."""
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "kernelpilot", "tune", str(batch), "--json", "--no-plots", "--out", str(out),
           "--store", str(out / "results.sqlite"), "--cache-dir", str(cache), *flags]  # fmt: skip
    if args.replay:
        cmd += ["--replay", str(args.replay)]
    if args.jobs:
        cmd += ["--jobs", str(args.jobs)]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    (work / f"{name}.stderr.txt").write_text(proc.stderr[-20000:])
    try:
        doc = json.loads(proc.stdout)  # exit 1 with a JSON document: a result above peak was flagged
    except json.JSONDecodeError:
        print(
            f"  {name}: FAILED exit {proc.returncode} after {wall:.1f} s: {proc.stderr[-1500:]}", flush=True
        )
        return {"name": name, "command": " ".join(cmd[1:]), "wall_s": round(wall, 2), "exit_code": proc.returncode,
                "error": proc.stderr[-3000:], "workloads": {}}  # fmt: skip
    (work / f"{name}.run.json").write_text(json.dumps(doc, indent=1, default=str))
    per = {}
    for w in doc["workloads"]:
        best = w.get("best") or {}
        per[w["name"]] = {
            "tried": sorted((t["label"], t["status"]) for t in w["tried"]),
            "best": best.get("label"),
            "best_ms": best.get("time_ms"),
            "times_ms": {t["label"]: t["time_ms"] for t in w["tried"] if t["time_ms"]},
        }
    print(f"  {name}: {wall:.1f} s wall, executor {doc.get('executor', {})}", flush=True)
    return {
        "name": name,
        "command": " ".join(cmd[1:]).replace(str(REPO) + "/", ""),
        "exit_code": proc.returncode,
        "wall_s": round(wall, 2),
        "executor": doc.get("executor"),
        "device_name": doc.get("device_name"),
        "library": doc.get("library"),
        "toolchain": (doc.get("toolchain") or "").splitlines()[-1:] or None,
        "workloads": per,
    }


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Same configs tried with the same statuses; same best config, or a difference explained by the
    measured times (the two bests' times in each run)."""
    report: dict[str, Any] = {"same_configs_and_statuses": True, "same_best": True, "workloads": {}}
    for name, wa in a["workloads"].items():
        wb = b["workloads"].get(name)
        if wb is None:
            report["same_configs_and_statuses"] = False
            continue
        same_tried = wa["tried"] == wb["tried"]
        same_best = wa["best"] == wb["best"]
        report["same_configs_and_statuses"] &= same_tried
        report["same_best"] &= same_best
        entry: dict[str, Any] = {
            "same_tried": same_tried,
            "best": [wa["best"], wb["best"]],
            "best_ms": [wa["best_ms"], wb["best_ms"]],
        }
        if not same_best and wa["best"] and wb["best"]:
            # the other run's time of each run's winner: a swap within noise shows up as ratios ~1
            entry["a_best_in_b_ms"] = wb["times_ms"].get(wa["best"])
            entry["b_best_in_a_ms"] = wa["times_ms"].get(wb["best"])
        common = set(wa["times_ms"]) & set(wb["times_ms"])
        if common:
            ratios = sorted(wb["times_ms"][k] / wa["times_ms"][k] for k in common)
            entry["time_ratio_b_over_a"] = {
                "median": statistics.median(ratios),
                "min": ratios[0],
                "max": ratios[-1],
            }
        report["workloads"][name] = entry
    return report


def header(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    return {
        "mode": mode,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "rehearsal": bool(args.replay),
        "replay_store": str(args.replay) if args.replay else None,
        "versions": versions(),
        "batch": {
            "workloads": args.workloads,
            "budget_configs": args.budget,
            "proposer": "random",
            "seed": args.seed,
        },
    }


def save(args: argparse.Namespace, result: dict[str, Any]) -> Path:
    """Write the result file now (also after every run, so a killed command leaves what it measured)."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / (args.name or f"scaleout_{'2gpu' if args.mode == 'merge' else args.mode}.json")
    path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    return path


def ok_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in runs if "error" not in r]


def _overhead(
    result: dict[str, Any], key: str, inproc: list[dict[str, Any]], cluster: list[dict[str, Any]]
) -> None:
    """Median wall of each executor, the cluster's extra cost, and the results comparison."""
    inproc, cluster = ok_runs(inproc), ok_runs(cluster)
    if not inproc or not cluster:
        return
    a = statistics.median(r["wall_s"] for r in inproc)
    b = statistics.median(r["wall_s"] for r in cluster)
    result[key] = {
        "runs": {"inprocess": len(inproc), "cluster_local": len(cluster)},
        "median_wall_s": {"inprocess": a, "cluster_local": b},
        "bench_busy_s": {
            "inprocess": statistics.median((r["executor"] or {}).get("bench_busy_s") or 0.0 for r in inproc),
            "cluster_local": statistics.median(
                (r["executor"] or {}).get("bench_busy_s") or 0.0 for r in cluster
            ),
        },
        "build_busy_s": {
            "inprocess": statistics.median((r["executor"] or {}).get("build_busy_s") or 0.0 for r in inproc),
            "cluster_local": statistics.median(
                (r["executor"] or {}).get("build_busy_s") or 0.0 for r in cluster
            ),
        },
        "cluster_overhead": round(b / a - 1.0, 4),
        "overhead_ok": b <= 1.10 * a,
        "comparison": compare(inproc[0], cluster[0]),
    }


def run_h200(args: argparse.Namespace) -> dict[str, Any]:
    """Cold: each executor with its own empty build cache (a real batch: builds + benchmarks); the
    cluster goes first, so one-time warm-up effects of the machine favour the in-process run.
    Warm: alternating pairs on the in-process run's (now full) cache: only benchmarks and the
    executors' own fixed costs, the harshest view of the overhead."""
    t_start = time.time()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    batch = work / "batch.yaml"
    names = write_batch(batch, args.workloads, args.budget, args.seed, args.replay)
    result = header(args, "h200")
    result["workload_names"] = names
    result["overhead_target"] = 0.10
    gpu = ["--gpus", args.gpus_override] if args.gpus_override else []
    cluster = ["--cluster", "local", *gpu]
    runs: dict[str, list[dict[str, Any]]] = {
        "cold_inprocess": [],
        "cold_cluster_local": [],
        "inprocess": [],
        "cluster_local": [],
    }
    result["runs"] = runs
    caches = {"cold_cluster_local": work / "cache_cluster", "cold_inprocess": work / "cache"}
    for mode, flags in (("cold_cluster_local", cluster), ("cold_inprocess", [])):
        shutil.rmtree(caches[mode], ignore_errors=True)
        print(f"{mode} (empty build cache)", flush=True)
        runs[mode].append(tune(batch, work, mode, caches[mode], flags, args))
        save(args, result)
    _overhead(result, "cold", runs["cold_inprocess"], runs["cold_cluster_local"])
    for rep in range(args.reps):
        pair = [("cluster_local", cluster), ("inprocess", [])]
        if rep % 2:
            pair.reverse()  # alternate the order so drift does not favour one executor
        for mode, flags in pair:
            elapsed = time.time() - t_start
            last = max((r["wall_s"] for r in runs["inprocess"] + runs["cluster_local"]), default=30.0)
            if args.deadline_s and elapsed + 1.3 * last > args.deadline_s:
                result.setdefault("skipped", []).append(
                    f"warm {mode} rep {rep}: would pass the {args.deadline_s} s deadline"
                )
                continue
            runs[mode].append(tune(batch, work, f"warm_{mode}_{rep}", caches["cold_inprocess"], flags, args))
            _overhead(result, "warm", runs["inprocess"], runs["cluster_local"])
            save(args, result)
    return result


def run_2gpu(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    batch = work / "batch.yaml"
    names = write_batch(batch, args.workloads, args.budget, args.seed, args.replay)
    result = header(args, "2gpu")
    result["workload_names"] = names
    result["phases"] = {}
    for phase in [p for p in args.phases.split(",") if p]:
        if phase not in PHASES_2GPU:
            raise SystemExit(f"unknown phase {phase!r}; allowed: {', '.join(PHASES_2GPU)}")
        flags = list(PHASES_2GPU[phase])
        if args.gpus_override:  # rehearsal on CPUs: any indices are pool slots with --replay
            flags[flags.index("--gpus") + 1] = ",".join(
                args.gpus_override.split(",")[: len(flags[-1].split(","))]
            )
        cache = work / f"cache_{phase}"
        shutil.rmtree(cache, ignore_errors=True)  # cold build cache for every phase
        print(f"phase {phase}: {' '.join(flags)}", flush=True)
        result["phases"][phase] = tune(batch, work, phase, cache, flags, args)
        save(args, summarize_2gpu(result))
    return summarize_2gpu(result)


def summarize_2gpu(result: dict[str, Any]) -> dict[str, Any]:
    ph = result["phases"]
    summary: dict[str, Any] = {}
    for phase, r in ph.items():
        if "error" in r:
            summary[phase] = {"error": r["error"][-500:]}
            continue
        ex = r.get("executor") or {}
        summary[phase] = {
            "wall_s": r["wall_s"],
            "build_busy_s": ex.get("build_busy_s"),
            "bench_busy_s": ex.get("bench_busy_s"),
        }
    for one, two in (("1gpu", "2gpu"), ("cluster1", "cluster2"), ("1gpu", "cluster2")):
        if one in ph and two in ph and "error" not in ph[one] and "error" not in ph[two]:
            a, b = summary[one], summary[two]
            summary[f"{two}_vs_{one}"] = {
                "wall_speedup": round(a["wall_s"] / b["wall_s"], 3) if b["wall_s"] else None,
                "bench_speedup": round(a["bench_busy_s"] / b["bench_busy_s"], 3)
                if b.get("bench_busy_s")
                else None,
                "comparison": compare(ph[one], ph[two]),
            }
    result["summary"] = summary
    return result


def merge(args: argparse.Namespace) -> dict[str, Any]:
    docs = [json.loads(Path(f).read_text()) for f in args.files]
    result = dict(docs[0])
    result["phases"] = {}
    result["merged_from"] = [
        {"file": f, "date": d.get("date"), "command": d.get("command")}
        for f, d in zip(args.files, docs, strict=True)
    ]
    for d in docs:
        result["phases"].update(d.get("phases", {}))
    return summarize_2gpu(result)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=("h200", "2gpu", "merge"))
    p.add_argument("files", nargs="*", help="merge: per-phase result files")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results"), help="folder for the result JSON")
    p.add_argument("--name", help="result file name (default scaleout_<mode>.json)")
    p.add_argument("--work", default="/tmp/kp-scaleout", help="scratch folder (runs, stores, build caches)")
    p.add_argument("--workloads", type=int, help="GEMM shapes from the list (default 4 for h200, 8 for 2gpu)")
    p.add_argument("--budget", type=int, help="configs per workload, the default included (h200 8, 2gpu 6)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reps", type=int, default=2, help="h200: alternating in-process / cluster pairs")
    p.add_argument("--phases", default="1gpu,2gpu,cluster2", help="2gpu: " + ",".join(PHASES_2GPU))
    p.add_argument("--jobs", type=int, help="parallel compile jobs (default: from cores and memory)")
    p.add_argument("--deadline-s", type=float, default=540.0, help="h200: skip runs that would end later")
    p.add_argument("--replay", help="CPU rehearsal: serve measurements from this store")
    p.add_argument("--gpus-override", help="CPU rehearsal: pool slots to use instead of real GPUs, e.g. 0,1")
    args = p.parse_intermixed_args()
    if args.budget is None:
        args.budget = 6 if args.mode == "2gpu" else 8
    if args.workloads is None:
        args.workloads = 8 if args.mode == "2gpu" else 4
    if args.mode == "h200":
        result = run_h200(args)
    elif args.mode == "2gpu":
        result = run_2gpu(args)
    else:
        if not args.files:
            p.error("merge needs the per-phase result files")
        result = merge(args)
    print(f"wrote {save(args, result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
