"""H200 evidence for the tile tuner: cuBLAS side by side, cold/warm wall time, exhaustive
ground truth over the ten GEMM shapes.  Run on the GPU machine from the repository root:

    python benchmarks/gemm_h200.py --out $OUT --jobs 15 --phases cublas,cold,warm,gt --gt-minutes 5.5

Phases (each optional, in this order):
  cublas  torch.matmul (cuBLAS) on every shape: same inputs distribution (uniform [-1, 1) bf16), rotating
          input sets > 2.5x L2, warm-up, CUDA events, median of 5 repetitions of >= 10 ms.
  cold    `kernelpilot tune` of one shape with the default (model) proposer, budget 16, EMPTY build cache:
          the wall time includes every build.
  warm    the same command again with --remeasure: builds come from the cache, everything is re-run.
  gt      exhaustive ground truth: every config of the (filtered) legal space on all ten shapes, one
          results store (`gt.sqlite`, committed as replay test data), stops at --gt-minutes.
Writes summary.json plus the stores / run JSONs into --out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

SHAPES = [
    ("sq8192", 8192, 8192, 8192),
    ("sq4096", 4096, 4096, 4096),
    ("m8192_n6144_k4096", 8192, 6144, 4096),
    ("m8192_n28672_k4096", 8192, 28672, 4096),
    ("m8192_n4096_k14336", 8192, 4096, 14336),
    ("m4096_n8192_k8192", 4096, 8192, 8192),
    ("m64_n28672_k4096", 64, 28672, 4096),
    ("m16_n4096_k14336", 16, 4096, 14336),
    ("sq3000", 3000, 3000, 3000),
    ("sq1024", 1024, 1024, 1024),
]
# Ground-truth space: the sm90 model's legal bf16 space restricted to TK=64 (the 128-byte swizzle),
# clusters with at most 2 CTAs and the persistent schedules (see docs/tile_tuner.md for why).
GT_SPACE = {"tile_k": [64], "cluster": [[1, 1], [2, 1], [1, 2]], "schedule": ["cooperative", "pingpong"]}
# Exhaustive phases: name -> (which shapes, space filter).  ``gt`` is the recorded ground truth; ``skinny``
# and ``swap`` extend it with the families the sm90 model adds for tiny M (hw_models/sm90/gemm.py
# enum_families): tile N 16/32 for M <= 64, swap-AB for M <= 32.
GT_PHASES = {
    "gt": (lambda m: True, GT_SPACE),
    "skinny": (lambda m: m <= 64, {**GT_SPACE, "tile_n": [16, 32], "swap_ab": [False]}),
    "swap": (lambda m: m <= 32, {**GT_SPACE, "swap_ab": [True]}),
}
# ``final``: per shape, the space filter that selects the best configs of the recorded ground truth
# (benchmarks/results/gemm_h200_results.json); a shape takes the ``skinny`` or ``swap`` phase's winner
# when that phase ran in the same call and beat the recorded best.
FINAL_CONFIGS = Path(__file__).with_name("gemm_h200_final_configs.json")


def exact_filter(config: dict) -> dict:
    """A space filter that admits exactly ``config`` (every field pinned)."""
    return {
        "tile": [config["tile"]],
        "cluster": [config["cluster"]],
        "schedule": [config["schedule"]],
        "epilogue": [config["epilogue"]],
        "tile_scheduler": [config["tile_scheduler"]],
        "swap_ab": [bool(config.get("swap_ab"))],
    }


def tune_batch(work: Path, out: Path, phase: str, shapes, space_of, cache: Path, args, log: Path, extra=()):
    """One exhaustive ``kernelpilot tune`` batch over ``shapes`` with a per-workload space filter;
    the store, run JSON and per-phase name go to ``out``; ``extra`` are more CLI flags."""
    import yaml

    batch = {
        "target": "sm90",
        "defaults": {"kernel": "gemm", "dtype": "bf16", "layout": "rr", "proposer": "exhaustive", "budget_configs": 1000},
        "workloads": [
            {"name": name, "dims": {"M": m, "N": n, "K": k}, "space": space_of(name)} for name, m, n, k in shapes
        ],
    }  # fmt: skip
    bf = work / f"{phase}.yaml"
    bf.write_text(yaml.safe_dump(batch, sort_keys=False))
    shutil.copy(bf, out / f"{phase}.yaml")
    targs = [
        "tune", str(bf), "--jobs", str(args.jobs), "--batch-size", str(args.gt_batch), "--cache-dir", str(cache),
        "--store", str(out / f"{phase}.sqlite"), "--out", str(work / phase), "--no-plots", "--json",
        "--target-ms", str(args.target_ms), *extra,
    ]  # fmt: skip
    rc, wall = kp(targs, log)
    if (work / phase / "run.json").exists():
        shutil.copy(work / phase / "run.json", out / f"run_{phase}.json")
    return rc, wall, "kernelpilot " + " ".join(targs)


def cublas(
    out: Path, graphs: bool = True, clock_warmup_s: float = 1.0, filename: str = "cublas.json"
) -> dict:
    """torch.matmul timings.  With ``graphs`` the timed launches are captured in a CUDA graph and the
    graph is replayed, so PyTorch's per-call host dispatch (~10-20 us) is not counted: without it,
    microsecond-scale shapes (1024^3, M=16) measure the host, not cuBLAS (the recorded run of commit
    38e9455 used neither graphs nor the clock warm-up)."""
    import torch

    res = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0),
        "shapes": {},
        "graphs": graphs,
        "clock_warmup_s": clock_warmup_s,
    }
    g = torch.Generator(device="cuda").manual_seed(0)
    # The GPU idles at 345 MHz; without this the first shape is timed while the clocks ramp up (seen in
    # the recorded run: cuBLAS 8192^3 at 577-607 TFLOP/s, the first shape of each pass).
    x = torch.rand(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g)
    t0 = time.time()
    while time.time() - t0 < clock_warmup_s:
        torch.matmul(x, x)
        torch.cuda.synchronize()
    del x
    for name, m, n, k in SHAPES:
        set_bytes = 2 * (m * k + k * n + m * n)
        nbuf = max(1, min(64, math.ceil(2.5 * 60e6 / set_bytes)))
        a = [torch.rand(m, k, device="cuda", dtype=torch.bfloat16, generator=g) * 2 - 1 for _ in range(nbuf)]
        b = [torch.rand(k, n, device="cuda", dtype=torch.bfloat16, generator=g) * 2 - 1 for _ in range(nbuf)]
        c = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(nbuf)]
        ref = a[0].double() @ b[0].double()
        torch.matmul(a[0], b[0], out=c[0])
        rel = float((c[0].double() - ref).norm() / ref.norm())
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        it, t0 = 0, time.time()
        while it < 5 or time.time() - t0 < 0.05:
            torch.matmul(a[it % nbuf], b[it % nbuf], out=c[it % nbuf])
            it += 1
        torch.cuda.synchronize()
        e0.record()
        for i in range(20):
            torch.matmul(a[i % nbuf], b[i % nbuf], out=c[i % nbuf])
        e1.record()
        torch.cuda.synchronize()
        per = e0.elapsed_time(e1) / 20
        iters = max(3, min(20000, int(10.0 / max(per, 1e-4))))
        reps = []
        graph = None
        if graphs:
            iters = min(iters, 2000)
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):  # warm cuBLAS (workspace, heuristics) on the capture stream
                torch.matmul(a[0], b[0], out=c[0])
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for i in range(iters):
                    torch.matmul(a[i % nbuf], b[i % nbuf], out=c[i % nbuf])
            graph.replay()
            torch.cuda.synchronize()
        for r in range(5):
            e0.record()
            if graph is not None:
                graph.replay()
            else:
                for i in range(iters):
                    j = (r * iters + i) % nbuf
                    torch.matmul(a[j], b[j], out=c[j])
            e1.record()
            torch.cuda.synchronize()
            reps.append(e0.elapsed_time(e1) / iters)
        reps.sort()
        med = reps[len(reps) // 2]
        res["shapes"][name] = {
            "M": m, "N": n, "K": k, "time_ms": {"median": med, "min": reps[0], "max": reps[-1], "repetitions": 5},
            "iters": iters, "rotating_buffers": nbuf, "tflops": 2 * m * n * k / (med * 1e-3) / 1e12, "rel_err_vs_fp64": rel,
        }  # fmt: skip
        print(
            f"cublas {name}: {med:.4f} ms {res['shapes'][name]['tflops']:.1f} TFLOP/s rel_err {rel:.2e}",
            flush=True,
        )
        del a, b, c, ref, graph
        torch.cuda.empty_cache()
    (out / filename).write_text(json.dumps(res, indent=1))
    return res


def kp(args: list[str], log: Path) -> tuple[int, float]:
    t0 = time.time()
    with log.open("a") as fh:
        fh.write(f"\n$ kernelpilot {' '.join(args)}\n")
        fh.flush()
        rc = subprocess.call(
            [sys.executable, "-m", "kernelpilot", *args], stdout=fh, stderr=subprocess.STDOUT
        )
    return rc, time.time() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/kpwork")
    ap.add_argument("--jobs", type=int, default=15)
    ap.add_argument("--gt-batch", type=int, default=17, help="configs per ground-truth round (34 = 2 rounds)")
    ap.add_argument("--phases", default="cublas,cold,warm,gt", help="also: skinny, swap, final, cublas2")
    ap.add_argument("--gt-minutes", type=float, default=None, help="default: what is left of --deadline-s")
    ap.add_argument(
        "--deadline-s", type=float, default=540.0, help="seconds from start by which everything ends"
    )
    ap.add_argument("--target-ms", type=float, default=5.0)
    ap.add_argument("--cold-shape", default="M=8192,N=8192,K=8192")
    ap.add_argument(
        "--cublas-no-graphs", action="store_true", help="time eager torch.matmul calls (as in 38e9455)"
    )
    args = ap.parse_args()
    t_start = time.time()
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    log = out / "log.txt"
    phases = args.phases.split(",")
    summary: dict = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join([sys.executable, *sys.argv]),
        "host": platform.node(),
        "cores": os.cpu_count(),
        "nvcc": subprocess.run(["nvcc", "--version"], capture_output=True, text=True)
        .stdout.strip()
        .splitlines()[-1],
        "gpu": subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        ).stdout.strip(),
        "cutlass_dir": os.environ.get("CUTLASS_DIR"),
        "gt_space": GT_SPACE,
        "phases": {},
    }

    def save() -> None:
        (out / "summary.json").write_text(json.dumps(summary, indent=1))

    cache = work / "cache"
    if "cublas" in phases:
        t0 = time.time()
        summary["phases"]["cublas"] = {"wall_s": None}
        cublas(out, graphs=not args.cublas_no_graphs)
        summary["phases"]["cublas"]["wall_s"] = round(time.time() - t0, 1)
        save()
    cold_args = [
        "tune", "--target", "sm90", "--kernel", "gemm", "--dims", args.cold_shape, "--dtype", "bf16",
        "--cache-dir", str(cache), "--no-plots", "--json", "--target-ms", str(args.target_ms),
    ]  # fmt: skip
    if "cold" in phases:
        shutil.rmtree(cache, ignore_errors=True)
        rc, wall = kp([*cold_args, "--store", str(work / "cold.sqlite"), "--out", str(work / "cold")], log)
        summary["phases"]["cold"] = {
            "rc": rc,
            "wall_s": round(wall, 1),
            "command": "kernelpilot " + " ".join(cold_args),
        }
        shutil.copy(work / "cold" / "run.json", out / "run_cold.json") if (
            work / "cold" / "run.json"
        ).exists() else None
        save()
    if "warm" in phases:
        rc, wall = kp(
            [*cold_args, "--store", str(work / "cold.sqlite"), "--out", str(work / "warm"), "--remeasure"],
            log,
        )
        summary["phases"]["warm"] = {
            "rc": rc,
            "wall_s": round(wall, 1),
            "command": "kernelpilot " + " ".join(cold_args) + " --remeasure",
        }
        shutil.copy(work / "warm" / "run.json", out / "run_warm.json") if (
            work / "warm" / "run.json"
        ).exists() else None
        save()
    for phase, (selects, space) in GT_PHASES.items():
        if phase not in phases:
            continue
        extra = []
        if phase == "gt":  # the full ground truth stops at the call's deadline
            minutes = args.gt_minutes or max(0.5, (args.deadline_s - (time.time() - t_start) - 20) / 60.0)
            extra = ["--budget-minutes", f"{minutes:.2f}"]
        shapes = [shape for shape in SHAPES if selects(shape[1])]
        rc, wall, gargs = tune_batch(
            work, out, phase, shapes, lambda name, sp=space: sp, cache, args, log, extra
        )
        summary["phases"][phase] = {"rc": rc, "wall_s": round(wall, 1), "command": gargs}
        save()
    if "final" in phases:
        final = json.loads(FINAL_CONFIGS.read_text())
        filters = final["filters"]
        for phase_run in (out / f"run_{phase}.json" for phase in ("skinny", "swap")):
            if not phase_run.exists():
                continue
            for w in json.loads(phase_run.read_text())["workloads"]:
                best = (w.get("best") or {}).get("config")
                name = w["name"]
                if best and (w["best"]["time_ms"] or 1e9) < final["recorded_best_ms"].get(name, 0.0):
                    filters[name] = exact_filter(best)
        rc, wall, gargs = tune_batch(work, out, "final", SHAPES, lambda name: filters[name], cache, args, log)
        summary["phases"]["final"] = {
            "rc": rc,
            "wall_s": round(wall, 1),
            "command": gargs,
            "filters": filters,
        }
        save()
    if "cublas2" in phases:  # a second cuBLAS pass after the tuned runs: drift shows as a difference
        t0 = time.time()
        cublas(out, graphs=not args.cublas_no_graphs, filename="cublas2.json")
        summary["phases"]["cublas2"] = {"wall_s": round(time.time() - t0, 1)}
        save()
    # compiler logs of failures (model disagreements) travel back in one archive
    fails = [p for p in cache.glob("*/FAILED")] if cache.exists() else []
    if fails:
        subprocess.call(["tar", "-czf", str(out / "failed_builds.tar.gz"), *[str(p.parent) for p in fails]])
    summary["failed_builds"] = len(fails)
    save()
    print(json.dumps({k: v for k, v in summary["phases"].items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
