"""H200 check of an exported package (``kernelpilot export``): results, fallbacks, speed, torch.compile.

Run by ``benchmarks/export_h200.sh`` after ``pip install`` of the exported folder.  What it records in
one JSON file:

* **tuned shapes**: ``torch.ops.NAME.gemm`` against an fp32 reference and ``torch.matmul``, under each
  fallback policy (a tuned shape runs its tuned kernel under all three; ``explain`` says so);
* **untuned shapes** (odd M, tiny M, a 3-D input, an N that no kernel may take): ``vendor`` returns
  exactly ``torch.matmul``'s result, ``nearest`` runs the nearest legal kernel (or the vendor library
  when none is legal) and matches the reference, ``error`` raises;
* **inputs the kernels cannot take** (fp32, non-contiguous A, column-major B, a misaligned pointer,
  CPU tensors): never a kernel; ``torch.matmul``'s result or, under ``error``, an exception;
* **speed**: each tuned shape timed from CUDA graphs over input sets rotated past L2 (the tuning
  programs' rule), interleaved with ``torch.matmul`` (cuBLAS) timed the same way; the ratio to the
  export's record of the shape in dispatch.json (the confirmed median where its run confirmed the
  winner; 3 % allowed) and the geometric mean of cuBLAS / exported over the tuned shapes;
* **torch.compile**: a two-layer MLP calling the op, ``fullgraph=True``, against the eager reference.

``--dry-run`` lists the plan from dispatch.json without torch or a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
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

POLICIES = ("vendor", "nearest", "error")
# (label, M, N, K, a batch shape or None): shapes no run tuned
UNTUNED = [
    ("m4000", 4000, 4096, 4096, None),
    ("m777_odd", 777, 4096, 4096, None),
    ("m2_tiny", 2, 4096, 14336, None),
    ("m128", 128, 28672, 4096, None),
    ("batched_4x512", 2048, 4096, 4096, (4, 512)),
    ("n1004_unaligned", 1000, 1004, 1000, None),  # N % 8 != 0: no kernel is legal (TMA alignment)
]
L2_BYTES, ROTATE = 60.0e6, 2.5  # as the tuning programs: input sets rotated past 2.5x L2
TARGET_MS = 5.0
WARMUP_MS = 5.0  # the tuning programs' warm-up before timing


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def plan(dispatch: dict[str, Any]) -> dict[str, Any]:
    gemm = [e for e in dispatch["entries"] if e["kind"] == "gemm"]
    tuned = [(e["dims"]["M"], e["dims"]["N"], e["dims"]["K"]) for e in gemm]
    # what each timed shape is compared with: the export's own record of it, the confirmed median where
    # the run it came from confirmed its winner (merged exports take rows from several runs)
    records = [{"shape": list(t), "time_ms": e["time_ms"], "time_source": e["time_source"],
                "run": e.get("origin", {}).get("run")} for t, e in zip(tuned, gemm, strict=True)]  # fmt: skip
    return {
        "tuned": tuned,
        # tuned shapes the export serves with cuBLAS (the run confirmed cuBLAS faster there)
        "vendor_served": [list(t) for t, e in zip(tuned, gemm, strict=True) if e.get("route") == "vendor"],
        "records": records,
        "untuned": [u[:4] for u in UNTUNED],
        "policies": list(POLICIES),
    }


def check_close(out, a, b) -> dict[str, Any]:
    """The tuning programs' check: |out - ref| <= atol + rtol |ref| everywhere, relative L2 error < 1e-2."""
    import torch

    ref = a.float().reshape(-1, a.shape[-1]) @ b.float()
    got = out.float().reshape(ref.shape)
    k = a.shape[-1]
    atol, rtol = 1e-2 * (1.0 + math.sqrt(k) / 3.0), 1e-2
    diff = (got - ref).abs()
    bad = int((diff > atol + rtol * ref.abs()).sum().item()) + int((~torch.isfinite(got)).sum().item())
    rel = float(torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-30))
    return {"ok": bad == 0 and rel < 1e-2, "bad": bad, "rel_err": rel, "max_abs": float(diff.max().item())}


def inputs(m: int, n: int, k: int, batch=None, seed: int = 0, dtype=None):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    dtype = dtype or torch.bfloat16
    a = (torch.rand((m, k), generator=g, device="cuda") * 2 - 1).to(dtype)
    b = (torch.rand((k, n), generator=g, device="cuda") * 2 - 1).to(dtype)
    if batch:
        a = a.reshape(*batch, k)
    return a, b


def run_policy_cases(mod, ops, tuned, res: dict[str, Any], vendor_served=()) -> None:
    import torch

    served = {tuple(v) for v in vendor_served}

    bm, bn, bk = tuned[0]  # the bad-input cases use the first tuned shape
    bad_cases = {
        "fp32": lambda: inputs(bm, bn, bk, dtype=torch.float32),
        "a_not_contiguous": lambda: (inputs(bk, 8, bm)[0].t(), inputs(bm, bn, bk)[1]),  # A^T's storage
        "b_column_major": lambda: (inputs(bm, bn, bk)[0], inputs(bn, 8, bk)[0].t()),  # layout rc: not tuned
        "a_misaligned": lambda: (
            torch.empty(bm * bk + 1, device="cuda", dtype=torch.bfloat16)[1:].view(bm, bk).uniform_(-1, 1),
            inputs(bm, bn, bk)[1],
        ),
        "cpu": lambda: tuple(t.cpu() for t in inputs(256, 256, 256)),
    }
    for policy in POLICIES:
        mod.set_fallback(policy)
        assert mod.get_fallback() == policy
        for m, n, k in tuned:
            a, b = inputs(m, n, k, seed=m + n + k)
            how = mod.explain(a, b)
            out = ops.gemm(a, b)
            c = check_close(out, a, b)
            res["tuned_correct"].append({"policy": policy, "shape": [m, n, k], "explain": how, **c,
                                         "ok": c["ok"] and how.startswith("vendor" if (m, n, k) in served else "tuned")})  # fmt: skip
        for label, m, n, k, batch in UNTUNED:
            a, b = inputs(m, n, k, batch, seed=7 * m + n)
            how = mod.explain(a, b)
            rec: dict[str, Any] = {"policy": policy, "case": label, "shape": [m, n, k], "explain": how}
            legal = n % 8 == 0 and k % 8 == 0
            if policy == "error":
                try:
                    ops.gemm(a, b)
                    rec.update(ok=False, error="no exception")
                except RuntimeError as exc:
                    rec.update(ok="fallback=error" in str(exc), error=str(exc).splitlines()[0][:300])
            else:
                out = ops.gemm(a, b)
                c = check_close(out, a, b)
                rec.update(c)
                if policy == "vendor" or not legal:
                    same = bool(torch.equal(out, torch.matmul(a, b)))
                    rec.update(ok=c["ok"] and same and how.startswith("vendor"), equals_torch_matmul=same)
                else:
                    rec.update(ok=c["ok"] and how.startswith("nearest"))
            res["untuned"].append(rec)
        for label, make in bad_cases.items():
            a, b = make()
            how = mod.explain(a, b)
            rec = {"policy": policy, "case": label, "explain": how}
            if policy == "error":
                try:
                    ops.gemm(a, b)
                    rec.update(ok=False, error="no exception")
                except RuntimeError as exc:
                    rec.update(ok="fallback=error" in str(exc), error=str(exc).splitlines()[0][:300])
            else:
                out = ops.gemm(a, b)
                same = bool(torch.equal(out, torch.matmul(a, b)))
                rec.update(ok=same and how.startswith("vendor"), equals_torch_matmul=same)
            res["bad_inputs"].append(rec)
    mod.set_fallback("vendor")


def graph_time(fn, sets, iters: int, reps: int = 5) -> dict[str, Any]:
    """Median ms per call of ``fn`` replayed from a CUDA graph of ``iters`` calls over rotating input sets,
    after the tuning programs' warm-up (at least 5 ms and 3 calls)."""
    import torch

    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    n_est = 0
    while True:
        fn(*sets[n_est % len(sets)])
        n_est += 1
        if n_est >= 3:
            e1.record()
            e1.synchronize()
            if e0.elapsed_time(e1) >= WARMUP_MS or n_est >= 2000:
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


def run_timing(ops, torch_mod, dispatch, run_times, res: dict[str, Any], deadline: float) -> None:
    torch = torch_mod
    for e in dispatch["entries"]:
        if time.time() > deadline:
            res["timing_skipped"] = "deadline"
            break
        m, n, k = e["dims"]["M"], e["dims"]["N"], e["dims"]["K"]
        nbuf = max(1, min(64, math.ceil(ROTATE * L2_BYTES / (2.0 * (m * k + k * n + m * n)))))
        sets = [inputs(m, n, k, seed=100 + i) for i in range(nbuf)]
        # one graph length for both sides, from the record (an estimate from eager calls would count
        # the operator's host dispatch and give the two sides different lengths)
        iters = int(min(2000, max(3, round(TARGET_MS / e["time_ms"]))))
        rounds = []
        for _ in range(3):  # interleaved: exported, cuBLAS, exported, cuBLAS, ...
            rounds.append((graph_time(ops.gemm, sets, iters), graph_time(torch.matmul, sets, iters)))
        exp_ms = statistics.median(r[0]["median"] for r in rounds)  # median over rounds of per-round medians
        cub_ms = statistics.median(r[1]["median"] for r in rounds)
        # the row's own record (confirmed where its run confirmed), not another run's; a cuBLAS-served row
        # is held to cuBLAS's confirmed time of the same rounds
        run_ms = e["vendor_ms"] if e.get("route") == "vendor" else e["time_ms"]
        res["timing"].append({
            "shape": [m, n, k], "kernel": e["kernel"], "route": e.get("route", "kernel"), "label": e["label"],
            "exported_ms": exp_ms, "cublas_ms": cub_ms,
            "run_ms": run_ms, "run_time_source": e["time_source"], "run": e.get("origin", {}).get("run"),
            "run_file_ms": run_times.get((m, n, k)), "exported_vs_run": exp_ms / run_ms,
            "within_3pct_of_run": exp_ms <= 1.03 * run_ms, "cublas_over_exported": cub_ms / exp_ms,
            "rounds": [{"exported": r[0], "cublas": r[1]} for r in rounds], "rotating_sets": nbuf,
        })  # fmt: skip
        log(f"{m}x{n}x{k}: exported {exp_ms:.4f} ms, cuBLAS {cub_ms:.4f} ms, run {run_ms:.4f} ms")
        del sets
        torch.cuda.empty_cache()


def run_compile(mod, ops, torch, res: dict[str, Any]) -> None:
    """A two-layer MLP through the op under torch.compile(fullgraph=True): up (64 x 28672 x 4096, tuned)
    and down (64 x 4096 x 28672, not tuned: the fallback)."""
    mod.set_fallback("vendor")
    x, w1 = inputs(64, 28672, 4096, seed=11)
    w2 = inputs(28672, 4096, 28672, seed=12)[1] * 0.05

    def model(x):
        return ops.gemm(torch.nn.functional.silu(ops.gemm(x, w1)), w2)

    def reference(x):
        return torch.matmul(torch.nn.functional.silu(torch.matmul(x, w1)), w2)

    torch._dynamo.reset()
    t0 = time.time()
    compiled = torch.compile(model, fullgraph=True)
    out = compiled(x)
    torch.cuda.synchronize()
    compile_s = time.time() - t0
    ref = reference(x)
    rel = float(torch.linalg.vector_norm((out - ref).float()) / torch.linalg.vector_norm(ref.float()))
    explain = [mod.explain(x, w1), mod.explain(torch.empty(64, 28672, device="cuda", dtype=x.dtype), w2)]
    res["torch_compile"] = {"ok": rel < 2e-2 and out.shape == ref.shape, "rel_err_vs_eager_matmul": rel,
                            "compile_s": compile_s, "fullgraph": True, "layers": explain}  # fmt: skip


def versions() -> dict[str, Any]:
    import torch

    nvcc = ""
    with contextlib.suppress(OSError, IndexError):
        nvcc = (
            subprocess.run(["nvcc", "--version"], capture_output=True, text=True)
            .stdout.strip()
            .splitlines()[-1]
        )
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(), "nvcc": nvcc,
            "device": torch.cuda.get_device_name(0)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", required=True, help="the exported package / torch.ops namespace")
    ap.add_argument("--dispatch", required=True, help="the export's dispatch.json")
    ap.add_argument(
        "--run", help="a run.json whose times are recorded beside (not instead of) the export's own"
    )
    ap.add_argument("--out", required=True, help="result JSON")
    ap.add_argument("--install-s", type=float, help="seconds `pip install` of the export took (recorded)")
    ap.add_argument("--install-how", default="pip install", help="how it was installed")
    ap.add_argument("--deadline-s", type=float, default=420.0, help="skip remaining timings after this")
    ap.add_argument("--dry-run", action="store_true", help="print the plan; no torch, no GPU")
    args = ap.parse_args(argv)
    t_start = time.time()
    dispatch = json.loads(Path(args.dispatch).read_text())
    run_times: dict[tuple[int, int, int], float] = {}
    if args.run:
        for w in json.loads(Path(args.run).read_text())["workloads"]:
            if w.get("best"):
                d = w["dims"]
                run_times[(d["M"], d["N"], d["K"])] = w["best"].get("confirmed_ms") or w["best"]["time_ms"]
    p = plan(dispatch)
    if args.dry_run:
        print(json.dumps({"plan": p, "run_times": len(run_times)}, indent=1))
        return 0
    import torch

    mod = importlib.import_module(args.name)
    ops = getattr(torch.ops, args.name)
    res: dict[str, Any] = {
        "what": "exported package (kernelpilot export) on the H200: results, fallbacks, CUDA-graph timing, torch.compile",
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(sys.argv),
        "versions": versions(),
        "install_s": args.install_s,
        "install_how": args.install_how,
        "dispatch_times": dispatch.get("times"),
        "tuned_correct": [],
        "untuned": [],
        "bad_inputs": [],
        "timing": [],
    }
    out = Path(args.out)

    def save() -> None:
        out.write_text(json.dumps(res, indent=1))

    stages = [
        ("policies", lambda: run_policy_cases(mod, ops, p["tuned"], res, p["vendor_served"])),
        ("compile", lambda: run_compile(mod, ops, torch, res)),
        ("timing", lambda: run_timing(ops, torch, dispatch, run_times, res, t_start + args.deadline_s)),
    ]
    for name, stage in stages:
        log(f"stage {name}")
        try:
            stage()
        except Exception as exc:  # noqa: BLE001 - one failing stage must not lose the others' results
            res.setdefault("stage_errors", {})[name] = f"{type(exc).__name__}: {exc}"[:2000]
            log(f"stage {name} failed: {exc}")
        save()
    t = res["timing"]
    res["summary"] = {
        "tuned_correct": all(r["ok"] for r in res["tuned_correct"]) and bool(res["tuned_correct"]),
        "untuned_ok": all(r["ok"] for r in res["untuned"]) and bool(res["untuned"]),
        "bad_inputs_ok": all(r["ok"] for r in res["bad_inputs"]) and bool(res["bad_inputs"]),
        "timed_shapes": len(t),
        "within_3pct_of_run": sum(r["within_3pct_of_run"] for r in t),
        "geomean_cublas_over_exported": math.exp(
            statistics.fmean(math.log(r["cublas_over_exported"]) for r in t)
        )
        if t
        else None,
        "torch_compile_ok": res.get("torch_compile", {}).get("ok"),
        "wall_s": round(time.time() - t_start, 1),
    }
    save()
    print(json.dumps(res["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
