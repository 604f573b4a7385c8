"""Benchmark the CUDA grouped GEMM, MoE GEMM and Hopper FMHA kinds on the GPU next to PyTorch.

For every workload of ``cuda_kinds_common``: run each candidate program (built by
``cuda_kinds_build.py`` through the tuner's builder; missing ones are built here), each measuring all
its run-time variants in one process with its own correctness check, then time PyTorch's paths on the
same shapes in the same process run:

* grouped / MoE: a loop of ``torch.mm`` per group, and ``torch._grouped_mm`` where the groups share N, K;
* attention: ``scaled_dot_product_attention`` under ``sdpa_kernel(FLASH_ATTENTION)`` (GQA through
  ``enable_gqa``; if the flash backend refuses it, K/V expanded to all heads outside the timing).

"tuned" is the best verified (config, variant) of the model-ranked candidate set; "default" is the
library default config (the sm90 model's ``default_config`` for the GEMM kinds, the first config
example 88 instantiates for the head dim for FMHA) with default run-time knobs (raster M, swizzle 1).
All times are medians of repeated CUDA-event timings on random data with L2-defeating buffer rotation
(the programs and the PyTorch timings use the same rotation rule).

Usage on the GPU machine::

    python benchmarks/cuda_kinds_bench.py --cache .kp-cache/cuda_kinds --out results.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cuda_kinds_build as build  # noqa: E402
import cuda_kinds_common as common  # noqa: E402

from kernelpilot.tile_tuner.builder import BuildCache, build_batch  # noqa: E402
from kernelpilot.tile_tuner.runner import run_program  # noqa: E402

L2_ROTATE_BYTES = 200 << 20
NO_BUILD = False
SAMPLE_LINES: dict[str, str] = {}  # one verified program result per kind, kept as test data


def n_buffers(nbytes: float) -> int:
    """Same rule as the programs: enough copies that the working set is >= 200 MB, at most 8."""
    return int(min(8, max(1, math.ceil(L2_ROTATE_BYTES / max(nbytes, 1)))))


def time_cuda(fns: list, warmup: int = 5, iters: int = 20, reps: int = 5) -> dict[str, float]:
    import torch

    for i in range(warmup):
        fns[i % len(fns)]()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        e0.record()
        for i in range(iters):
            fns[i % len(fns)]()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / iters)
    times.sort()
    return {"median": times[len(times) // 2], "min": times[0], "max": times[-1], "repetitions": reps}


def torch_grouped(problem: dict[str, Any]) -> dict[str, Any]:
    import torch

    groups = problem["groups"]
    nbytes = sum(2 * (m * k + n * k + m * n) for m, n, k in groups)
    nb = n_buffers(nbytes)
    out: dict[str, Any] = {}
    bufs = []
    for _ in range(nb):
        xs = [torch.empty(m, k, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1) for m, n, k in groups]
        ws = [torch.empty(n, k, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1) for m, n, k in groups]
        os_ = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for m, n, k in groups]
        bufs.append((xs, ws, os_))

    def loop(b):
        xs, ws, os_ = b
        return lambda: [torch.mm(x, w.t(), out=o) for x, w, o in zip(xs, ws, os_, strict=True)]

    out["torch_mm_loop"] = {"time_ms": time_cuda([loop(b) for b in bufs]), "buffers": nb}
    same_nk = len({(n, k) for _, n, k in groups}) == 1
    if not same_nk:
        out["torch_grouped_mm"] = {"skipped": "groups differ in N or K (torch._grouped_mm needs one N, K)"}
    elif not hasattr(torch, "_grouped_mm"):
        out["torch_grouped_mm"] = {"skipped": f"torch {torch.__version__} has no torch._grouped_mm"}
    else:
        n, k = groups[0][1], groups[0][2]
        offs = torch.tensor(list(_cumsum([g[0] for g in groups])), device="cuda", dtype=torch.int32)
        gbufs = []
        for xs, ws, _ in bufs:
            x = torch.cat(xs)
            w = torch.stack(ws)  # (G, N, K): nn.Linear weights
            gbufs.append((x, w))
        try:
            ref_x, ref_w = gbufs[0]
            y = torch._grouped_mm(ref_x, ref_w.transpose(-2, -1), offs=offs)
            # sanity: compare one group against torch.mm
            m0 = groups[0][0]
            err = (y[:m0].float() - (bufs[0][0][0] @ bufs[0][1][0].t()).float()).abs().max().item()
            fns = [(lambda x=x, w=w: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)) for x, w in gbufs]
            out["torch_grouped_mm"] = {
                "time_ms": time_cuda(fns),
                "buffers": nb,
                "group0_max_abs_diff_vs_mm": err,
            }
        except Exception as exc:  # noqa: BLE001 - record why PyTorch's path could not run
            out["torch_grouped_mm"] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        del n, k
    del bufs
    torch.cuda.empty_cache()
    return out


def _cumsum(values: list[int]):
    s = 0
    for v in values:
        s += v
        yield s


def torch_attention(problem: dict[str, Any]) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, hq, hkv = problem["batch"], problem["num_heads_q"], problem["num_heads_kv"]
    sq, skv, d, causal = problem["seq_qo"], problem["seq_kv"], problem["head_dim"], problem["causal"]
    nbytes = 2 * (2 * b * hq * sq * d + 2 * b * hkv * skv * d)
    nb = n_buffers(nbytes)
    bufs = []
    for _ in range(nb):
        q = torch.randn(b, hq, sq, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, hkv, skv, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(b, hkv, skv, d, device="cuda", dtype=torch.bfloat16)
        bufs.append((q, k, v))
    note = "enable_gqa=True"
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(*bufs[0], is_causal=causal, enable_gqa=hq != hkv)
        gqa = hq != hkv
    except Exception as exc:  # noqa: BLE001
        note = (
            f"flash refused enable_gqa ({type(exc).__name__}); K/V expanded to {hq} heads outside the timing"
        )
        bufs = [(q, k.repeat_interleave(hq // hkv, 1), v.repeat_interleave(hq // hkv, 1)) for q, k, v in bufs]
        gqa = False

    def call(qkv):
        return lambda: F.scaled_dot_product_attention(*qkv, is_causal=causal, enable_gqa=gqa)

    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            t = time_cuda([call(x) for x in bufs])
        res = {"torch_sdpa_flash": {"time_ms": t, "buffers": nb, "note": note}}
    except Exception as exc:  # noqa: BLE001
        res = {"torch_sdpa_flash": {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}}
    del bufs
    torch.cuda.empty_cache()
    return res


def run_candidates(
    kernel, kind: str, problem: dict[str, Any], cands: list[tuple[dict, Path | None, str]]
) -> list[dict]:
    rows = []
    for cfg, binary, label in cands:
        row: dict[str, Any] = {"label": label, "config": cfg}
        if binary is None:
            row.update(status="not_built" if NO_BUILD else "build_failed")
            rows.append(row)
            continue
        runtime: dict[str, Any] = {}
        if kind in ("grouped_gemm", "moe_gemm"):
            runtime["variants"] = kernel.runtime_variants(cfg, problem)
            runtime["verify_rows"] = 16  # per group, every column, every variant (+ the full ragged check)
        else:
            runtime["verify_rows"] = 256
        argv, env = kernel.run_command(binary, problem, runtime)
        outcome = run_program(argv, env, timeout_s=120)
        row.update(status=outcome.status, seconds=round(outcome.seconds, 2), message=outcome.message[:400])
        if outcome.result is not None:
            r = outcome.raw
            if outcome.status == "ok":
                SAMPLE_LINES.setdefault(kind, json.dumps(r, separators=(",", ":")))
            row["time_ms"] = r.get("time_ms")
            row["runtime"] = r.get("runtime")
            row["verification"] = r.get("verification")
            for key in ("variants", "stages", "smem_bytes", "q_padded", "device_name"):
                if key in r:
                    row[key] = r[key]
        rows.append(row)
        print(f"  {label:50s} {row['status']:12s} {((row.get('time_ms') or {}).get('median'))}", flush=True)
    return rows


def tflops(flops: float, ms: float | None) -> float | None:
    return None if not ms else flops / (ms * 1e-3) / 1e12


def summarize(
    kind: str, kernel, problem: dict[str, Any], rows: list[dict], torch_res: dict, default_label: str
) -> dict:
    flops = kernel.flops(problem)
    ok = [r for r in rows if r["status"] == "ok" and r.get("time_ms")]
    best = min(ok, key=lambda r: r["time_ms"]["median"]) if ok else None
    default_row = next((r for r in rows if r["label"] == default_label), None)
    default_ms = None
    if default_row and default_row["status"] == "ok":
        if "variants" in default_row:  # default run-time knobs: raster M, swizzle 1
            v = next((v for v in default_row["variants"] if v["raster"] == "M" and v["swizzle"] == 1), None)
            default_ms = v["median"] if v and v.get("passed") else None
        else:
            default_ms = default_row["time_ms"]["median"]
    torch_times = {k: v["time_ms"]["median"] for k, v in torch_res.items() if "time_ms" in v}
    torch_best = min(torch_times.values()) if torch_times else None
    tuned_ms = best["time_ms"]["median"] if best else None
    return {
        "flops": flops,
        "tuned": {
            "label": best["label"] if best else None,
            "runtime": best.get("runtime") if best else None,
            "time_ms": tuned_ms,
            "tflops": tflops(flops, tuned_ms),
        },
        "default": {"label": default_label, "time_ms": default_ms, "tflops": tflops(flops, default_ms)},
        "pytorch": {k: {"time_ms": t, "tflops": tflops(flops, t)} for k, t in torch_times.items()},
        "pytorch_notes": {
            k: {kk: vv for kk, vv in v.items() if kk != "time_ms"} for k, v in torch_res.items()
        },
        "speedup_tuned_vs_default": (default_ms / tuned_ms) if tuned_ms and default_ms else None,
        "speedup_tuned_vs_best_pytorch": (torch_best / tuned_ms) if tuned_ms and torch_best else None,
        "tuned_ge_pytorch": (tuned_ms <= torch_best) if tuned_ms and torch_best else None,
        "configs": rows,
    }


def versions() -> dict[str, Any]:
    import torch

    from kernelpilot.toolchain import find_headers, tool_version

    tree = find_headers("cutlass")
    gpu = torch.cuda.is_available()
    return {
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0) if gpu else None,
        "sm_count": torch.cuda.get_device_properties(0).multi_processor_count if gpu else None,
        "nvcc": tool_version("nvcc"),
        "cutlass": tree.version if tree else None,
        "python": platform.python_version(),
        "driver": _driver(),
    }


def _driver() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        )
    except OSError:
        return None
    return out.stdout.strip() or None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=".kp-cache/cuda_kinds")
    ap.add_argument("--work", default="/tmp/kp_cuda_kinds_build")
    ap.add_argument("--out", required=True)
    ap.add_argument("--kinds", default="grouped_gemm,moe_gemm,fa_prefill,fa_decode")
    ap.add_argument("--jobs", type=int, default=None, help="parallel compile jobs for missing programs")
    ap.add_argument(
        "--no-build", action="store_true", help="use the cache only (smoke test on a CPU machine)"
    )
    ap.add_argument("--workloads", default="", help="comma list of workload names to run (default: all)")
    args = ap.parse_args()
    global NO_BUILD
    NO_BUILD = args.no_build
    t_start = time.time()
    probs = common.problems()
    ks = common.kernels()
    cache = BuildCache(args.cache)
    plan = build.plan()
    # build what the carried cache lacks (GEMM and FMHA recipes are separate batches)
    t0 = time.time()
    by_recipe: dict[str, list] = {}
    for kind, _label, _cfg, item, _ in plan:
        by_recipe.setdefault("grouped" if kind == "grouped_gemm" else "fmha", []).append((kind, item))
    build_status = {}
    for entries in [] if args.no_build else by_recipe.values():
        recipe = ks[entries[0][0]].build_recipe("sm90", {})
        outcomes = build_batch([e[1] for e in entries], recipe, cache, Path(args.work), jobs=args.jobs)
        build_status.update({k: o.status for k, o in outcomes.items()})
    build_seconds = time.time() - t0
    print(f"builds: {build_status} in {build_seconds:.0f} s", flush=True)

    default_gemm, _ = common.gemm_candidates(probs)
    from kernelpilot.dsl_plugins.cuda.fmha import fmha_label, normalize_fmha_config
    from kernelpilot.dsl_plugins.cuda.grouped_gemm import config_label, normalize_gemm_config

    gemm_default_label = f"grouped_gemm_bf16_{config_label(normalize_gemm_config(default_gemm))}"
    results: dict[str, Any] = {}
    doc = {
        "what": "CUDA grouped GEMM / MoE GEMM / Hopper FMHA: tuned vs library default vs PyTorch",
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join([sys.executable, *sys.argv]),
        "versions": versions(),
        "dtype": common.DTYPE,
        "build": {"seconds": round(build_seconds, 1), "status": build_status},
        "timing": "medians of 5 repetitions x 20 launches (CUDA events), 5 warm-up launches, buffers rotated "
        "so the working set is >= 200 MB; every CUTLASS run verified against an fp32 GPU reference",
        "complete": False,
        "sample_program_lines": SAMPLE_LINES,
        "results": results,
    }
    for kind in args.kinds.split(","):
        kernel = ks[kind]
        results[kind] = {}
        for name, problem in probs[kind].items():
            if args.workloads and name not in args.workloads.split(","):
                continue
            print(f"{kind} {name}", flush=True)
            if kind in ("grouped_gemm", "moe_gemm"):
                cands = [
                    (cfg, cache.binary(item.cache_key), label)
                    for k, label, cfg, item, _ in plan
                    if k == "grouped_gemm"
                ]
                default_label = gemm_default_label
            else:
                mask = "causal" if problem["causal"] else "nomask"
                cands = []
                for k, label, cfg, item, p in plan:
                    if (
                        k == kind
                        and p["head_dim"] == problem["head_dim"]
                        and p["causal"] == problem["causal"]
                    ):
                        cands.append((cfg, cache.binary(item.cache_key), label))
                first = common.fmha_candidates(kind, problem["head_dim"])[0]
                default_label = (
                    f"{kind}_bf16_{mask}_{fmha_label(normalize_fmha_config(first, problem['head_dim']))}"
                )
            rows = run_candidates(kernel, kind, problem, cands)
            try:
                grouped = kind in ("grouped_gemm", "moe_gemm")
                torch_res = torch_grouped(problem) if grouped else torch_attention(problem)
            except Exception as exc:  # noqa: BLE001 - no GPU / no torch: recorded, not fatal
                torch_res = {"torch": {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}}
            summary = summarize(kind, kernel, problem, rows, torch_res, default_label)
            summary["problem"] = {k: v for k, v in problem.items() if k not in ("groups", "tokens")}
            if "groups" in problem:
                summary["problem"]["group_count"] = len(problem["groups"])
                summary["problem"]["groups"] = problem["groups"]
            results[kind][name] = summary
            t, p = summary["tuned"], summary["pytorch"]
            print(
                f"  => tuned {t['label']} {t['time_ms']} ms; default {summary['default']['time_ms']}; "
                f"pytorch {json.dumps({k: v['time_ms'] for k, v in p.items()})}",
                flush=True,
            )
            doc["wall_seconds"] = round(time.time() - t_start, 1)
            Path(args.out).write_text(json.dumps(doc, indent=1))  # incremental: a cut-off run keeps its data
    doc["complete"] = True
    doc["wall_seconds"] = round(time.time() - t_start, 1)
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(f"wrote {args.out} in {time.time() - t_start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
