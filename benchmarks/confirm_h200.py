"""Confirmed tuning results next to the vendor library on one H200, in one call.

Phases (in this order, each skipped with a note when the deadline would be passed):

  plan      `kernelpilot tune --dry-run` of both batches: the programs of each workload's one round
            (budget = batch size, so a real run proposes exactly these);
  build     every planned program built in ONE parallel step (GEMM, FMHA and grouped recipes side by
            side, --jobs split between them), so the tune calls below find every binary in the cache;
  gemm      `kernelpilot tune` on six bf16 GEMM shapes (the four of the confirmation write-up and two
            Llama-3-8B projections) with confirmation (--finalists 3 --confirm-rounds 3) and the cuBLAS
            baseline;
  ncu       an independent check of one GEMM winner: `ncu --clock-control none --graph-profiling graph`
            durations of the timed CUDA graphs of the tuned program (the run's graph length) and of the
            cuBLAS worker on the same shape (benchmarks/confirm_crosscheck_h200.py); the ratio is
            compared with the run's `vs vendor`;
  fa_prefill, fa_decode, moe_gemm, grouped_gemm
            `kernelpilot tune` on each kind's workloads of benchmarks/cuda_kinds_common.py, same
            confirmation; baselines: every SDPA backend (+ flash_attn), torch._grouped_mm or a torch.mm loop.

Writes into --out: summary.json (versions, commands, phase wall times, per-workload table, the cost
of confirmation, the ncu check), run_gemm.json, run_kinds.json, log.txt, ncu_tuned.csv, ncu_vendor.csv
and each tune phase's results store, store_<phase>.sqlite: a later call given ``--resume`` that folder
goes on from it, so a phase the deadline cut does not measure its configs again.  From the repository
root on the GPU machine:

    python3 benchmarks/confirm_h200.py --out $OUT --jobs 16 --deadline-s 510

``--plan-only`` (any machine) writes the batches and the dry-run plans and prints the build counts
(per kind, and the unique programs per build family with how many ``--cache`` already holds);
``--build-only`` plans and builds every program into ``--cache`` and stops: a prebuild on a CPU machine
with the same nvcc and CUTLASS, whose binaries the GPU call finds as cache hits; ``--build-labels`` keeps
that build to the programs of the named config labels (the finalists a ``--resume`` call confirms again:
its search is served from the store, so it builds nothing else).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cuda_kinds_common as kinds  # noqa: E402

GEMM_SHAPES = [  # name, M, N, K  (A[M,K] @ B[K,N], bf16)
    ("m8192_n3584_k18944", 8192, 3584, 18944),
    ("m2048_n7168_k18432", 2048, 7168, 18432),
    ("m32_n12288_k4096", 32, 12288, 4096),
    ("m1000_n2000_k3000", 1000, 2000, 3000),
    ("llama3_8b_qkv_m8192", 8192, 6144, 4096),  # examples/tune_llama3_gemm_sm90.yaml qkv_proj
    ("llama3_8b_decode_gate_up_m64", 64, 28672, 4096),  # ... decode_gate_up
]
# configs per workload, the library default included; each workload's search is one round, so the
# parallel build step can build every program up front.  Sized to fit one 10-minute device call.
GEMM_BUDGET = 4
KIND_BUDGET = {"fa_prefill": 2, "fa_decode": 2, "moe_gemm": 3, "grouped_gemm": 3}
KIND_ORDER = ("fa_prefill", "fa_decode", "moe_gemm", "grouped_gemm")  # most decisive claims first
NCU_WORKLOAD = "m2048_n7168_k18432"


def kind_workloads() -> dict[str, dict[str, dict[str, Any]]]:
    """kind -> workload name -> dims, from cuda_kinds_common."""
    return {"fa_prefill": kinds.FA_PREFILL_WORKLOADS, "fa_decode": kinds.FA_DECODE_WORKLOADS,
            "grouped_gemm": kinds.GROUPED_WORKLOADS, "moe_gemm": kinds.MOE_WORKLOADS}  # fmt: skip


def batches(
    work: Path,
    budgets: dict[str, int] | None = None,
    only: set[str] | None = None,
    space: dict[str, list[Any]] | None = None,
) -> dict[str, Path]:
    """One batch file per phase: the GEMM shapes, then each kind's workloads of cuda_kinds_common
    (``only``: just these workload names; ``budgets``: configs per workload, default included, by kind or
    by workload name, the name winning; ``space``: a space filter written into the grouped / MoE kinds'
    defaults, e.g. ``{"swap_ab": [false]}`` to leave the swap-AB family out)."""
    import yaml

    docs: dict[str, Any] = {
        "gemm": {
            "target": "sm90",
            "defaults": {"kernel": "gemm", "dtype": "bf16", "layout": "rr", "proposer": "model",
                         "budget_configs": GEMM_BUDGET},
            "workloads": [{"name": n, "dims": {"M": m, "N": nn, "K": k}} for n, m, nn, k in GEMM_SHAPES],
        }
    }  # fmt: skip
    table = kind_workloads()
    for kind in KIND_ORDER:
        docs[kind] = {
            "target": "sm90",
            "defaults": {
                "kernel": kind,
                "dtype": "bf16",
                "proposer": "model",
                "budget_configs": (budgets or {}).get(kind, KIND_BUDGET[kind]),
                **({"space": space} if space and kind in ("moe_gemm", "grouped_gemm") else {}),
            },
            "workloads": [{"name": name, "dims": dims,
                           **({"budget_configs": budgets[name]} if name in (budgets or {}) else {})}
                          for name, dims in table[kind].items() if only is None or name in only],
        }  # fmt: skip
    out = {}
    for name, doc in docs.items():
        if not doc["workloads"]:
            continue
        out[name] = work / f"{name}.yaml"
        out[name].write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def kp(args: list[str], log: Path, timeout_s: float) -> tuple[int, float]:
    """One kernelpilot call in its own process group: a timeout stops it and every compiler it started."""
    from kernelpilot.proc import communicate_or_kill

    t0 = time.time()
    with log.open("a") as fh:
        fh.write(f"\n$ kernelpilot {' '.join(args)}\n")
        fh.flush()
        proc = subprocess.Popen([sys.executable, "-m", "kernelpilot", *args], stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        _, _, timed_out = communicate_or_kill(proc, timeout_s)
    return (124 if timed_out else proc.returncode), time.time() - t0


def plan(files: dict[str, Path], work: Path) -> dict[str, Any]:
    """Dry-run plans, in this process (the exact programs each tune call will build)."""
    from kernelpilot.tile_tuner.api import run_batch
    from kernelpilot.tile_tuner.batch import load_batch
    from kernelpilot.tile_tuner.workload import TuneOptions

    plans = {}
    for name, batch in files.items():
        target, workloads, _ = load_batch(batch)
        pdir = work / f"plan_{name}"
        pdir.mkdir(parents=True, exist_ok=True)
        opts = TuneOptions(out_dir=pdir, store_path=pdir / "unused.sqlite", cache_dir=work / "cache")
        plans[name] = run_batch(target, workloads, opts, dry_run=True)
    return plans


def build_items(
    plans: dict[str, Any], files: dict[str, Path], labels: set[str] | None = None
) -> dict[str, tuple[Any, Any, dict[str, Any]]]:
    """family (gemm, fmha, grouped) -> (kernel, recipe, cache key -> BuildItem) of every planned program
    (with ``labels``, only the programs of those config labels: a call that re-confirms from a store needs
    its finalists' programs only); programs several workloads share (one grouped binary serves every
    grouped and MoE shape, one FMHA binary a head dim and mask) appear once."""
    from kernelpilot.tile_tuner.batch import load_batch
    from kernelpilot.tile_tuner.builder import BuildItem
    from kernelpilot.tile_tuner.kernels import get_tile_kernel

    per_recipe: dict[str, tuple[Any, Any, dict[str, BuildItem]]] = {}
    for name, doc in plans.items():
        raw_dims = {w.name: w.dims for w in load_batch(files[name])[1]}  # the plan holds normalized dims
        for w in (doc or {}).get("workloads", []):
            kernel = get_tile_kernel(w["kernel"], "sm90")
            family = (
                "fmha" if w["kernel"].startswith("fa_") else ("gemm" if w["kernel"] == "gemm" else "grouped")
            )
            if family not in per_recipe:
                per_recipe[family] = (kernel, kernel.build_recipe("sm90", {}), {})
            _, recipe, items = per_recipe[family]
            problem = kernel.validate_problem(raw_dims[w["name"]], w["dtype"], w["name"])
            for entry in w["planned"]:
                if labels is not None and entry["label"] not in labels:
                    continue
                prog = kernel.render(entry["config"], problem, "sm90")
                item = BuildItem.create(prog, recipe, kernel.template_version, entry["label"])
                items.setdefault(item.cache_key, item)
    return per_recipe


def planned_labels(plans: dict[str, Any]) -> list[str]:
    """Every config label the dry-run plans hold."""
    return sorted(
        {e["label"] for doc in plans.values() for w in (doc or {}).get("workloads", []) for e in w["planned"]}
    )


def cached_programs(per_recipe: dict[str, tuple[Any, Any, dict[str, Any]]], cache: Path) -> dict[str, Any]:
    """Per family: unique programs and how many of them ``cache`` already holds (a carried prebuild)."""
    from kernelpilot.tile_tuner.builder import BuildCache

    cache_obj = BuildCache(cache)
    return {
        family: {"programs": len(items), "cached": sum(cache_obj.binary(k) is not None for k in items)}
        for family, (_, _, items) in per_recipe.items()
    }


def compile_slots_scale(programs: int, jobs: int, memory_fit: float, has_deadline: bool) -> float:
    """The share of ``programs`` that compile at once (each nvcc is one thread), never more than the
    compilers' memory fits (``memory_fit``: fitting jobs / programs).

    Without a deadline, up to about 2x ``jobs`` at once: a wave boundary per recipe would leave cores
    idle. With one, at most ``jobs``: a deadline stops the build wherever it is, and only finished programs
    are cached, so programs must finish one after another; with every program started at once, an H100
    call's 56 grouped programs of several kernels each (27 at a time on 16 cores) had finished none when
    its deadline stopped the build at 273 s."""
    slots = (1.0 if has_deadline else 2.0) * jobs
    return min(1.0, slots / max(1, programs), memory_fit)


def prebuild(
    plans: dict[str, Any],
    files: dict[str, Path],
    cache: Path,
    work: Path,
    jobs: int,
    mem_gb: float = 100.0,
    deadline: float | None = None,
    labels: set[str] | None = None,
) -> dict[str, Any]:
    """Every planned program in one parallel step: one builder thread per recipe (GEMM, FMHA, grouped);
    builds still running at ``deadline`` (epoch seconds) are stopped, so the tune phases keep their time."""
    from kernelpilot.tile_tuner.builder import BuildCache, build_batch

    per_recipe = build_items(plans, files, labels)
    want = {f: len(v[2]) for f, v in per_recipe.items()}
    mem = sum(n * per_recipe[f][1].memory_gb_per_job for f, n in want.items())
    scale = compile_slots_scale(sum(want.values()), jobs, mem_gb / mem if mem else 1.0, deadline is not None)
    cache_obj = BuildCache(cache)
    result: dict[str, Any] = {}

    def build(family: str) -> None:
        _, recipe, items = per_recipe[family]
        n = max(1, int(want[family] * scale))
        t0 = time.time()
        outcomes = build_batch(list(items.values()), recipe, cache_obj, work / f"build_{family}", jobs=n,
                               deadline=deadline)  # fmt: skip
        statuses = [o.status for o in outcomes.values()]
        result[family] = {"programs": len(items), "jobs": n, "wall_s": round(time.time() - t0, 1),
                          "status": {s: statuses.count(s) for s in set(statuses)}}  # fmt: skip

    threads = [threading.Thread(target=build, args=(f,)) for f in per_recipe]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return result


def table(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Per workload: search-time and confirmed winner, vendor path and ratio, spread, verdict."""
    rows = []
    for w in run.get("workloads", []):
        conf = w.get("confirmation") or {}
        vendor = w.get("vendor") or {}
        best, sb = w.get("best") or {}, w.get("search_best") or {}
        vendor_search = None
        if sb.get("time_ms") and vendor.get("confirmed_ms"):
            vendor_search = vendor["confirmed_ms"] / sb["time_ms"]
        rows.append({
            "workload": w["name"], "kernel": w["kernel"],
            "search_best": sb.get("label"), "search_ms": sb.get("time_ms"),
            "confirmed_best": best.get("label"), "confirmed_ms": best.get("time_ms"),
            "confirmed": best.get("confirmed"), "winner_changed": conf.get("winner_changed"),
            "spread": best.get("spread"), "unstable": conf.get("unstable"),
            "vendor": vendor.get("backend") or vendor.get("name"), "vendor_ms": vendor.get("confirmed_ms"),
            "vendor_status": vendor.get("status"), "vendor_reason": vendor.get("reason"),
            "vs_vendor": w.get("vs_vendor"), "vs_vendor_search_time": vendor_search,
            "vendor_candidates": {k: (v.get("time_ms") or {}).get("median") or v.get("skipped") or v.get("error")
                                  for k, v in (vendor.get("candidates") or {}).items()},
            "confirm_s": (w.get("time_s") or {}).get("confirm"), "verdict": w.get("verdict"),
        })  # fmt: skip
    return rows


def ncu_check(run: dict[str, Any], cache: Path, out: Path, work: Path) -> dict[str, Any]:
    """ncu over the same work on both sides (``confirm_crosscheck_h200``): each timed CUDA graph of the
    confirmed GEMM winner (the run's graph length: ``--iters``) and of the cuBLAS worker is one profiled
    workload; per launch = graph duration / launches.  Kernel durations alone would leave out the
    per-launch workspace reset and compare one isolated kernel with back-to-back launches."""
    import confirm_crosscheck_h200 as xc

    from kernelpilot.dsl_plugins.cuda.gemm import CutlassSm90Gemm
    from kernelpilot.tile_tuner.builder import BuildCache, BuildItem

    if shutil.which("ncu") is None:
        return {"error": "ncu not on PATH"}
    w = next((w for w in run["workloads"] if w["name"] == NCU_WORKLOAD), None) or run["workloads"][0]
    best = w.get("best") or {}
    if not best.get("config"):
        return {"error": f"{w['name']}: no winner"}
    kernel = CutlassSm90Gemm()
    problem = {**w["dims"], "dtype": w["dtype"]}
    recipe = kernel.build_recipe("sm90", {})
    item = BuildItem.create(
        kernel.render(best["config"], problem, "sm90"), recipe, kernel.template_version, ""
    )
    binary = BuildCache(cache).binary(item.cache_key)
    if binary is None:
        return {"error": f"{w['name']}: winner binary not in the cache"}
    variant = kernel.variant_from_runtime(best.get("runtime") or {}) or {}
    iters = max(3, int(10.0 / best["time_ms"]))  # the program's own rule at its default 10 ms target
    argv, _ = kernel.run_command(binary, problem, {"variants": [variant]})
    graph = ["--graph-profiling", "graph"]
    text, _ = xc.ncu([*argv, f"--iters={iters}"], graph, out / "ncu_tuned.csv", 240)
    tuned = xc.tuned_graph(text)
    script = work / "vendor_under_ncu.py"
    script.write_text(xc.VENDOR_UNDER_NCU)
    plan = kernel.vendor_baseline(problem, "sm90", {})
    vargv = [sys.executable, str(script), *plan.argv[3:]]  # drop "python -m module"
    text, _ = xc.ncu(vargv, [*graph, "--nvtx", "--nvtx-include", "kp_timed/"], out / "ncu_vendor.csv", 240)
    vendor = xc.vendor_graph(text)
    ratio = None
    if tuned.get("per_launch_ms") and vendor.get("per_launch_ms"):
        ratio = vendor["per_launch_ms"] / tuned["per_launch_ms"]
    run_ratio = w.get("vs_vendor")
    return {
        "workload": w["name"], "config": best["label"], "runtime_variant": variant, "iters": iters,
        "tuned": tuned, "vendor": vendor, "ncu_vs_vendor": ratio, "run_vs_vendor": run_ratio,
        "difference": (ratio / run_ratio - 1.0) if (ratio and run_ratio) else None,
        "agrees_within_3pct": (abs(ratio / run_ratio - 1.0) <= 0.03) if (ratio and run_ratio) else None,
    }  # fmt: skip


def confirmation_cost(summary: dict[str, Any]) -> dict[str, Any]:
    """Extra wall time of confirmation, from the run documents' own clocks (``confirm.wall_s`` is the
    time spent in confirmation after the searches; ``wall_s`` the whole tune call).  A cold run pays
    the builds too: the build step's wall time is added to the searches for the share."""
    tuned = {k: v for k, v in summary["phases"].items() if isinstance(v, dict) and "confirm_s" in v}
    confirm_s = sum(v["confirm_s"] for v in tuned.values())
    search_s = sum(v["search_s"] for v in tuned.values())
    build_s = (summary["phases"].get("build") or {}).get("wall_s") or 0.0
    workloads = sum(len(v.get("table", [])) for v in tuned.values())
    return {
        "confirm_s": round(confirm_s, 1), "search_s": round(search_s, 1), "build_s": build_s,
        "workloads": workloads, "confirm_s_per_workload": round(confirm_s / workloads, 2) if workloads else None,
        "share_of_cold_run": round(confirm_s / (confirm_s + search_s + build_s), 4) if tuned else None,
        "per_phase": {k: {"confirm_s": v["confirm_s"], "search_s": v["search_s"]} for k, v in tuned.items()},
    }  # fmt: skip


def versions() -> dict[str, Any]:
    def sh(cmd: list[str]) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    out: dict[str, Any] = {"python": platform.python_version(), "cores": os.cpu_count()}
    out["nvcc"] = (sh(["nvcc", "--version"]).splitlines() or [""])[-1]
    out["gpu"] = sh(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm", "--format=csv,noheader"])
    out["ncu"] = (sh(["ncu", "--version"]).splitlines() or [""])[-1]
    try:
        import torch

        out["torch"] = torch.__version__
        out["torch_cuda"] = torch.version.cuda
        out["cudnn"] = torch.backends.cudnn.version()
    except Exception as exc:  # noqa: BLE001
        out["torch"] = f"unavailable: {exc}"
    try:
        from kernelpilot.toolchain import find_headers

        tree = find_headers("cutlass")
        out["cutlass"] = tree.version if tree else None
    except Exception as exc:  # noqa: BLE001
        out["cutlass"] = f"unavailable: {exc}"
    return out


def parse_space(text: str) -> dict[str, list[Any]] | None:
    """``--space``: None when not given, else the filter; ValueError unless a JSON object of lists."""
    if not text:
        return None
    try:
        space = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg}): {text!r}") from None
    if not (isinstance(space, dict) and all(isinstance(v, list) for v in space.values())):
        raise ValueError(f"a JSON object of field -> list of allowed values, got {text!r}")
    return space


def copy_store(src: Path, dest: Path) -> None:
    """One self-contained copy of a results store.  The store runs in WAL mode, and a tune stopped by the
    deadline leaves its last results in the ``-wal`` file beside the database; SQLite's backup reads
    through it, where copying the database file alone would drop them."""
    import sqlite3

    dest.unlink(missing_ok=True)
    with sqlite3.connect(src) as source, sqlite3.connect(dest) as target:
        source.backup(target)
    source.close()
    target.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/kp_confirm")
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--deadline-s", type=float, default=510.0, help="seconds from start by which all ends")
    ap.add_argument("--phases", default="plan,build,gemm,ncu,fa_prefill,fa_decode,moe_gemm,grouped_gemm")
    ap.add_argument("--plan-only", action="store_true", help="write batches and dry-run plans, then stop")
    ap.add_argument(
        "--build-only",
        action="store_true",
        help="plan and build every program into --cache, then stop (a CPU prebuild for a later GPU call)",
    )
    ap.add_argument("--workloads", default="", help="comma list: only these workloads of the kinds")
    ap.add_argument(
        "--budget",
        default="",
        help="comma list kind=N or workload=N: configs per workload (default included)",
    )
    ap.add_argument("--cache", default="", help="build cache (default WORK/cache), e.g. one filled on a CPU")
    ap.add_argument(
        "--build-labels",
        default="",
        help="comma list of config labels: the build step builds only the planned programs of these "
        "(e.g. the finalists a --resume call confirms again)",
    )
    ap.add_argument(
        "--resume",
        default="",
        help="folder holding store_<kind>.sqlite of an earlier call: its tune phases go on from those stores",
    )
    ap.add_argument(
        "--space",
        default="",
        help="JSON space filter for the grouped / MoE kinds, e.g. '{\"swap_ab\": [false]}' (no swap-AB family)",
    )
    ap.add_argument(
        "--confirm-rounds",
        type=int,
        default=3,
        help="the tuner's interleaved confirmation rounds (its default, 3); more steady a record on a noisy GPU",
    )
    args = ap.parse_args()
    if args.resume and not Path(args.resume).is_dir():
        print(
            f"error: --resume: {args.resume} is not a folder (the output folder of an earlier call)",
            file=sys.stderr,
        )
        return 2
    try:
        space = parse_space(args.space)
    except ValueError as exc:
        print(f"error: --space: {exc}", file=sys.stderr)
        return 2
    t_start = time.time()
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    log, cache = out / "log.txt", Path(args.cache) if args.cache else work / "cache"
    phases = ["plan"] if args.plan_only else args.phases.split(",")
    found = versions()
    # the GPU the call got (an H200 call may be served by an H100): named from nvidia-smi, not assumed
    gpu = str(found.get("gpu", "")).split(",")[0] or "an unknown GPU"
    summary: dict[str, Any] = {
        "what": f"confirmed tuning winners and vendor baselines on {gpu} (kernelpilot tune, confirmation on)",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join([sys.executable, *sys.argv]),
        "versions": found,
        "phases": {},
        "skipped": [],
    }

    def save() -> None:
        summary["wall_s"] = round(time.time() - t_start, 1)
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))

    def left() -> float:
        return args.deadline_s - (time.time() - t_start)

    labels = set(args.build_labels.split(",")) if args.build_labels else None
    budgets = {k: int(v) for k, v in (x.split("=") for x in args.budget.split(",") if x)}
    only = set(args.workloads.split(",")) if args.workloads else None
    known = {name for kind in KIND_ORDER for name in kind_workloads()[kind]}
    if only and only - known:
        print(
            f"error: --workloads: unknown {sorted(only - known)}; allowed: {sorted(known)}", file=sys.stderr
        )
        return 2
    files = {k: v for k, v in batches(work, budgets, only, space).items() if k in phases or args.plan_only}
    summary["batches"] = {k: v.read_text() for k, v in files.items()}
    plans: dict[str, Any] = {}
    if "plan" in phases:
        plans = plan(files, work)
        planned = planned_labels(plans)
        # a typo in --build-labels would otherwise shrink the prebuild silently (the GPU call then builds
        # the missing programs on its own time)
        unknown = sorted(labels - set(planned)) if labels else []
        if unknown:
            print(
                f"error: --build-labels: {unknown} match no planned config; planned: {planned}",
                file=sys.stderr,
            )
            return 2
        summary["phases"]["plan"] = {
            name: {"programs": sum(p["programs"] for p in doc["projects"]) if doc else None}
            for name, doc in plans.items()
        }
        if args.plan_only:  # what the build step will compile, and what a carried cache already holds
            summary["build_plan"] = cached_programs(build_items(plans, files, labels), cache)
        save()
        print(
            json.dumps(
                {**summary["phases"]["plan"], **({"unique": summary["build_plan"]} if args.plan_only else {})}
            )
        )
    if args.plan_only:
        return 0
    if "build" in phases and plans:
        t0 = time.time()
        summary["phases"]["build"] = {"families": prebuild(plans, files, cache, work, args.jobs, deadline=t_start + args.deadline_s - 240, labels=labels),
                                      "wall_s": round(time.time() - t0, 1)}  # fmt: skip
        save()
    if args.build_only:
        print(json.dumps(summary["phases"].get("build", {})))
        return 0
    common = ["--jobs", str(args.jobs), "--cache-dir", str(cache), "--no-plots", "--json",
              "--finalists", "3", "--confirm-rounds", str(args.confirm_rounds)]  # fmt: skip
    runs: dict[str, Any] = {}
    order = [p for p in ("gemm", "ncu", *KIND_ORDER) if p in phases]
    for name in order:
        if name == "ncu":
            if "gemm" not in runs:
                summary["skipped"].append("ncu: no GEMM run")
            elif left() < 60:
                summary["skipped"].append(f"ncu: {left():.0f} s left")
            else:
                t0 = time.time()
                summary["phases"]["ncu"] = {**ncu_check(runs["gemm"], cache, out, work),
                                            "wall_s": round(time.time() - t0, 1)}  # fmt: skip
            save()
            continue
        need = 90.0 if name == "gemm" else 60.0
        if left() < need:
            summary["skipped"].append(f"{name}: {left():.0f} s left, needs about {need:.0f} s")
            save()
            continue
        store = work / f"{name}.sqlite"
        earlier = Path(args.resume) / f"store_{name}.sqlite" if args.resume else None
        if earlier is not None and earlier.exists() and not store.exists():
            shutil.copyfile(earlier, store)  # measured configs are not measured again
            summary.setdefault("resumed", []).append(name)
        targs = ["tune", str(files[name]), "--batch-size", "8", "--store", str(store),
                 "--out", str(work / name), *common]  # fmt: skip
        rc, wall = kp(targs, log, max(45.0, left() - 15.0))
        if store.exists():  # what a phase cut by the deadline measured comes back, for --resume
            copy_store(store, out / f"store_{name}.sqlite")
        run_json = work / name / "run.json"
        entry: dict[str, Any] = {
            "rc": rc,
            "wall_s": round(wall, 1),
            "command": "kernelpilot " + " ".join(targs),
        }
        if run_json.exists():
            run = json.loads(run_json.read_text())
            runs[name] = run
            confirm_s = run.get("confirm", {}).get("wall_s") or 0.0
            entry.update(table=table(run), confirm_s=confirm_s, search_s=round(run["wall_s"] - confirm_s, 1))
        summary["phases"][name] = entry
        if "gemm" in runs:
            (out / "run_gemm.json").write_text(json.dumps(runs["gemm"], indent=1, default=str))
        kind_runs = {k: v for k, v in runs.items() if k != "gemm"}
        if kind_runs:
            (out / "run_kinds.json").write_text(json.dumps(kind_runs, indent=1, default=str))
        save()
    summary["confirmation_cost"] = confirmation_cost(summary)
    save()
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "table"} if isinstance(v, dict) else v
                      for k, v in summary["phases"].items()}, indent=1, default=str))  # fmt: skip
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
