"""The exported GEMM operator against the tuning program that measured it, interleaved on one H200.

Why: the exported operator timed from CUDA graphs came out slower than the run's recorded times on the
large shapes, while it matched cuBLAS measured beside it.  Either the exported call does more work than
the tuning program's timed launch, or the record (another session, other clocks, short bursts on a
power-capped GPU) drifted.  This driver separates the two: for every tuned shape of an export it runs,
round by round with a rotating start, (1) the tuning program built from the same template for the
row's config, with the row's run-time knobs, (2) ``torch.ops.NAME.gemm`` and (3) ``torch.matmul``
(cuBLAS), all three with the same input rotation (2.5 x 60 MB, at most 64 sets), the same number of
calls per CUDA graph (``--iters`` for the program) and the same warm-up (>= 5 ms and 3 calls), and an
idle gap before each in-process measurement like the program's start-up.

    exported / program  > 1.03: the exported call is slower than the tuned kernel it wraps
    program / record    > 1.03: the record drifted (the same program is slower today)

Two steps:

* ``prepare`` (a CPU machine with kernelpilot): ``kernelpilot export`` of the runs into DIR/NAME, the
  tuning program of every exported kernel rendered into DIR/tuning/ (``render_source``, the program
  the tuner builds) with the tuner's nvcc flags in DIR/tuning/build.json;
* ``measure`` (the H200, after ``benchmarks/export_speed_h200.sh`` built both): the rounds, one JSON.

``measure --dry-run`` prints the plan (shapes, kernels, knobs, calls per graph, rotation, the program's
command line) from DIR without torch or a GPU.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import math
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

L2_BYTES, ROTATE, MAX_SETS = 60.0e6, 2.5, 64  # the GEMM programs' rotation rule
MAX_ITERS = 2000  # the GEMM programs' longest graph
WARMUP_MS = 5.0  # the GEMM programs' warm-up
SLOWER = 1.03  # the goal: within 3 %


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ------------------------------------------------------------------------------------------------ prepare


def prepare(runs: list[str], out: Path, name: str, cutlass_dir: str | None) -> dict[str, Any]:
    """Export ``runs`` into out/name and render the tuning program of each exported kernel."""
    from kernelpilot.dsl_plugins.cuda.gemm import NVCC_FLAGS, TEMPLATE_VERSION, render_source

    cmd = [sys.executable, "-m", "kernelpilot", "export", *runs, "--out", str(out / name), "--name", name,
           "--force"] + (["--cutlass-dir", cutlass_dir] if cutlass_dir else [])  # fmt: skip
    subprocess.run(cmd, check=True)
    dispatch = json.loads((out / name / "dispatch.json").read_text())
    tuning = out / "tuning"
    tuning.mkdir(parents=True, exist_ok=True)
    programs = {}
    tuned = [(k["id"], k) for k in dispatch["kernels"] if k.get("kind", "gemm") == "gemm"]
    # a vendor-served row has no kernel in the export: its tuned config's program still shows what the
    # run compared the vendor library with
    tuned += [(program_id(e), {**e, "config": e["tuned_config"]}) for e in dispatch["entries"]
              if e["kind"] == "gemm" and e.get("route") == "vendor"]  # fmt: skip
    for pid, k in tuned:
        (tuning / f"{pid}.cu").write_text(render_source(k["config"], k["dtype"], k["layout"]))
        programs[pid] = {
            "source": f"{pid}.cu",
            "label": k["label"],
            "dtype": k["dtype"],
            "layout": k["layout"],
        }
    build = {
        "template_version": TEMPLATE_VERSION,
        "nvcc_flags": list(
            NVCC_FLAGS
        ),  # the tuner's recipe; nvcc links the static CUDA runtime as its CMake does
        "includes": [
            f"../{name}/third_party/cutlass/include",
            f"../{name}/third_party/cutlass/tools/util/include",
        ],
        "programs": programs,
        "runs": runs,
        "export_command": " ".join(cmd[2:]),
    }
    (tuning / "build.json").write_text(json.dumps(build, indent=1))
    return build


# ------------------------------------------------------------------------------------------------ plan


def rotating_sets(m: int, n: int, k: int) -> int:
    """The programs' rule: input sets so the rotation exceeds 2.5 x L2 (bf16/f16: 2 bytes)."""
    return int(max(1, min(MAX_SETS, math.ceil(ROTATE * L2_BYTES / (2.0 * (m * k + k * n + m * n))))))


def program_id(entry: dict[str, Any]) -> str:
    """The tuning program of a dispatch row: its kernel's, or for a vendor-served row one of its own."""
    if entry.get("kernel"):
        return str(entry["kernel"])
    d = entry["dims"]
    return f"v_{d['M']}x{d['N']}x{d['K']}_{entry['dtype']}_{entry['layout']}"


def variant(knobs: dict[str, Any]) -> str:
    """A dispatch row's knobs as the program's --variants entry R:SW:D:SPLITS."""
    return f"{knobs['raster']}:{knobs['swizzle']}:{knobs['decomp']}:{knobs['splits']}"


def plan(root: Path, name: str, target_ms: float, reps: int) -> list[dict[str, Any]]:
    """One case per tuned GEMM row: the same calls per graph for all three contenders."""
    dispatch = json.loads((root / name / "dispatch.json").read_text())
    cases = []
    for e in dispatch["entries"]:
        if e["kind"] != "gemm":
            continue
        m, n, k = e["dims"]["M"], e["dims"]["N"], e["dims"]["K"]
        iters = int(min(MAX_ITERS, max(3, round(target_ms / e["time_ms"]))))
        vendor = e.get("route") == "vendor"
        argv = [str(root / "tuning" / "bin" / program_id(e)), f"--m={m}", f"--n={n}", f"--k={k}",
                f"--variants={variant(e['knobs'])}", f"--iters={iters}", f"--reps={reps}",
                f"--target_ms={target_ms}"]  # fmt: skip
        # the exported op is held to the time of what it calls: the tuned kernel's confirmed time, or for
        # a vendor-served row the vendor library's confirmed time of the same rounds
        cases.append({
            "shape": [m, n, k], "dtype": e["dtype"], "layout": e["layout"], "kernel": e["kernel"], "label": e["label"],
            "route": e.get("route", "kernel"), "route_reason": e.get("route_reason"),
            "knobs": e["knobs"], "record_ms": e["vendor_ms"] if vendor else e["time_ms"], "tuned_record_ms": e["time_ms"],
            "vendor_ratio": e.get("vendor_ratio"), "record_source": e["time_source"],
            "record_origin": e.get("origin", {}), "iters": iters, "rotating_sets": rotating_sets(m, n, k),
            "program": argv,
        })  # fmt: skip
    return cases


# ------------------------------------------------------------------------------------------------ measure


def run_program(argv: list[str]) -> dict[str, Any]:
    """One run of the tuning program: its JSON line (time, verification, sm_count, active clusters)."""
    t0 = time.time()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    line = next((ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("{")), "")
    doc = json.loads(line) if line else {"status": "no_output", "stderr": p.stderr[-800:]}
    keep = ("status", "time_ms", "runtime", "verification", "sm_count", "max_active_clusters", "workspace_bytes",
            "rotating_buffers", "template_version", "message")  # fmt: skip
    out = {k: doc.get(k) for k in keep if k in doc}
    out["rc"], out["seconds"] = p.returncode, round(time.time() - t0, 3)
    variants = doc.get("variants") or [{}]
    out["iters"], out["graph"] = variants[0].get("iters"), variants[0].get("graph")
    return out


def graph_time(torch, fn, sets, iters: int, reps: int) -> dict[str, Any]:
    """The programs' timing: warm-up >= 5 ms and 3 calls, ``iters`` calls over the rotating sets in one
    CUDA graph, one untimed replay, ``reps`` timed replays (device events); ms per call."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    it = 0
    while True:
        fn(*sets[it % len(sets)])
        it += 1
        if it >= 3 and (it % 8 == 0 or it == 3):
            e1.record()
            e1.synchronize()
            if e0.elapsed_time(e1) >= WARMUP_MS or it >= MAX_ITERS:
                break
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(iters):
            fn(*sets[i % len(sets)])
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / iters)
    del g
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "iters": iters}


def inputs(torch, m: int, n: int, k: int, seed: int, dtype):
    """Uniform [-1, 1) like the programs' fill (their splitmix draw, torch's generator here)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = (torch.rand((m, k), generator=g, device="cuda") * 2 - 1).to(dtype)
    b = (torch.rand((k, n), generator=g, device="cuda") * 2 - 1).to(dtype)
    return a, b


def smi() -> str:
    q = "clocks.sm,clocks.max.sm,power.draw,enforced.power.limit,temperature.gpu,clocks_event_reasons.active"
    try:
        p = subprocess.run(
            ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True, text=True
        )
        return p.stdout.strip()
    except OSError as exc:
        return f"nvidia-smi: {exc}"


def measure_case(torch, ops, mod, case: dict[str, Any], rounds: int, reps: int, gap_s: float,
                 deadline: float) -> dict[str, Any]:  # fmt: skip
    m, n, k = case["shape"]
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[case["dtype"]]
    sets = [inputs(torch, m, n, k, 100 + i, dtype) for i in range(case["rotating_sets"])]
    if case["layout"] == "rc":
        sets = [(a, b.t().contiguous().t()) for a, b in sets]
    explain = mod.explain(*sets[0])
    ref = sets[0][0].float() @ sets[0][1].float()
    got = ops.gemm(*sets[0]).float()
    rel = float(torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref))
    del ref, got

    def in_process(fn):
        def go():
            # the GPU idles about as long before each contender as before the program's timing
            time.sleep(gap_s)
            return graph_time(torch, fn, sets, case["iters"], reps)

        return go

    contenders = [("program", lambda: run_program(case["program"])), ("exported", in_process(ops.gemm)),
                  ("cublas", in_process(torch.matmul))]  # fmt: skip
    log_rounds: list[dict[str, Any]] = []
    for r in range(rounds):
        if time.time() > deadline:
            break
        row: dict[str, Any] = {"round": r, "order": [], "smi": smi()}
        for i in range(len(contenders)):
            label, fn = contenders[(r + i) % len(contenders)]
            row["order"].append(label)
            try:
                row[label] = fn()
            except Exception as exc:  # noqa: BLE001 - one failing contender is recorded, the rounds go on
                row[label] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        log_rounds.append(row)
    sets.clear()  # free the inputs before the next shape
    torch.cuda.empty_cache()

    def med(label: str) -> float | None:
        vals = []
        for row in log_rounds:
            t = row.get(label, {})
            v = (t.get("time_ms") or {}).get("median") if label == "program" else t.get("median")
            if v and (label != "program" or t.get("status") == "ok"):
                vals.append(float(v))
        return statistics.median(vals) if vals else None

    prog, exp, cub = med("program"), med("exported"), med("cublas")
    rec = case["record_ms"]
    path = "vendor" if case.get("route") == "vendor" else "tuned"
    out = {**case, "explain": explain, "exported_rel_err": rel, "exported_ok": rel < 1e-2 and explain.startswith(path),
           "rounds": log_rounds, "program_ms": prog,
           "exported_ms": exp, "cublas_ms": cub}  # fmt: skip
    out["exported_over_program"] = exp / prog if exp and prog else None
    out["program_over_record"] = prog / case.get("tuned_record_ms", rec) if prog else None
    out["exported_over_record"] = exp / rec if exp else None
    out["cublas_over_exported"] = cub / exp if cub and exp else None
    out["cublas_over_program"] = cub / prog if cub and prog else None
    slower_call = out["exported_over_program"] is not None and out["exported_over_program"] > SLOWER
    drifted = out["program_over_record"] is not None and out["program_over_record"] > SLOWER
    out["finding"] = (
        "incomplete" if exp is None or prog is None
        else "exported within 3 % of the record" if out["exported_over_record"] <= SLOWER
        else "exported call slower than the program" if slower_call
        else "record drifted (the program is slower today)" if drifted
        else "exported and program each within 3 %, together more than 3 % over the record"
    )  # fmt: skip
    return out


def geomean(values: list[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def measure(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    cases = plan(root, args.name, args.target_ms, args.reps)
    if args.dry_run:
        print(json.dumps({"cases": cases, "rounds": args.rounds, "gap_s": args.gap_s}, indent=1))
        return 0
    import torch

    t0 = time.time()
    mod = importlib.import_module(args.name)
    ops = getattr(torch.ops, args.name)
    mod.set_fallback("error")  # a tuned shape that did not reach its kernel raises instead of timing cuBLAS
    res: dict[str, Any] = {
        "what": "exported GEMM operator vs the tuning program of the same config vs cuBLAS, interleaved rounds",
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(sys.argv),
        "versions": {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "python": platform.python_version(),
            "device": torch.cuda.get_device_name(0),
        },  # fmt: skip
        "build": json.loads((root / "tuning" / "build.json").read_text()),
        "rule": {
            "rotation_bytes": ROTATE * L2_BYTES,
            "max_sets": MAX_SETS,
            "warmup_ms": WARMUP_MS,
            "target_ms": args.target_ms,
            "reps": args.reps,
            "rounds": args.rounds,
            "gap_s": args.gap_s,
        },  # fmt: skip
        "smi_start": smi(),
        "cases": [],
    }
    out = Path(args.out)
    deadline = t0 + args.deadline_s
    for case in cases:
        if time.time() > deadline:
            res.setdefault("skipped", []).append(case["shape"])
            continue
        try:
            c = measure_case(torch, ops, mod, case, args.rounds, args.reps, args.gap_s, deadline)
        except Exception as exc:  # noqa: BLE001 - one failing shape is recorded, the others still run
            c = {**case, "error": f"{type(exc).__name__}: {exc}"[:1000], "finding": "incomplete"}
        res["cases"].append(c)
        log(f"{case['shape']} {case['label']}: program {c.get('program_ms')} exported {c.get('exported_ms')} "
            f"cuBLAS {c.get('cublas_ms')} record {case['record_ms']} ({case['record_source']}): {c['finding']}")  # fmt: skip
        out.write_text(json.dumps(res, indent=1))
    done = [c for c in res["cases"] if c.get("exported_ms") and c.get("program_ms")]
    res["smi_end"] = smi()
    res["summary"] = {
        "cases": len(res["cases"]),
        "complete": len(done),
        "exported_within_3pct_of_program": sum(c["exported_over_program"] <= SLOWER for c in done),
        "program_within_3pct_of_record": sum(c["program_over_record"] <= SLOWER for c in done),
        "exported_within_3pct_of_record": sum(c["exported_over_record"] <= SLOWER for c in done),
        "geomean_exported_over_program": geomean([c["exported_over_program"] for c in done]),
        "geomean_cublas_over_exported": geomean(
            [c["cublas_over_exported"] for c in done if c["cublas_over_exported"]]
        ),
        "geomean_cublas_over_program": geomean(
            [c["cublas_over_program"] for c in done if c["cublas_over_program"]]
        ),
        "findings": {
            c["finding"]: sum(x["finding"] == c["finding"] for x in res["cases"]) for c in res["cases"]
        },
        "wall_s": round(time.time() - t0, 1),
    }
    out.write_text(json.dumps(res, indent=1))
    print(json.dumps(res["summary"], indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare", help="CPU: export the runs and render the tuning programs")
    p.add_argument(
        "runs", nargs="+", help="run.json files (confirmed runs first in weight: merge prefers them)"
    )
    p.add_argument(
        "--dir", required=True, help="folder for the export (DIR/NAME) and the programs (DIR/tuning)"
    )
    p.add_argument("--name", default="kp_h200")
    p.add_argument("--cutlass-dir", help="CUTLASS headers to bundle (default: CUTLASS_DIR)")
    q = sub.add_parser("measure", help="GPU: interleaved rounds of program, exported op and cuBLAS")
    q.add_argument("--dir", required=True, help="the prepared folder (programs built into DIR/tuning/bin)")
    q.add_argument("--name", default="kp_h200", help="the exported package / torch.ops namespace")
    q.add_argument("--out", default="export_speed_h200.json", help="result JSON")
    q.add_argument("--rounds", type=int, default=5)
    q.add_argument(
        "--reps", type=int, default=5, help="timed graph replays per measurement (the programs': 5)"
    )
    q.add_argument(
        "--target-ms", type=float, default=10.0, help="timed ms per replay: calls per graph (all sides)"
    )
    q.add_argument("--gap-s", type=float, default=0.3, help="idle seconds before each in-process measurement")
    q.add_argument("--deadline-s", type=float, default=300.0, help="start no new round after this")
    q.add_argument("--dry-run", action="store_true", help="print the plan; no torch, no GPU")
    args = ap.parse_args(argv)
    if args.step == "prepare":
        build = prepare(args.runs, Path(args.dir), args.name, args.cutlass_dir)
        print(json.dumps({"programs": sorted(build["programs"]), "dir": args.dir}, indent=1))
        return 0
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())
