"""CUDA source kernels through the optimization pipeline's rules engine: baseline vs optimized.

For each example under ``examples/cuda_*`` this runs the real pipeline (``kernelpilot optimize --dsl cuda
--engine rules``: static C++ analysis -> plan -> per-stage propose/verify loop -> fresh final check),
then re-checks the original and the pipeline's output on new random inputs and times them interleaved
(A B A B ...) in one worker process (``CudaSourceExecutor.evaluate_side_by_side``).  The stages that run
are the ones the analysis plans: ``memory_access`` (``__restrict__`` rewrite) and ``autotuning`` (the
spec's ``tunables:`` search); each candidate is compiled with nvcc and checked against the PyTorch
reference before its time counts.  ``cuda_inline_softmax`` is the ``load_inline`` form (a Python Model
with the CUDA in a string; every candidate is a torch extension build).

Time per example (target: well under 5 minutes on an H200): the autotuning batch is compiled in
parallel worker processes before the one-by-one checks (``CudaSourceExecutor.prebuild``), and
``--max-configs`` caps the candidates per autotuning attempt (a copy of the spec with
``tunables.max_configs`` lowered; the verification of each candidate is unchanged).
``benchmarks/cuda_source_device.sh`` is the one-line device run.

Usage (H200)::

    python benchmarks/cuda_source_h200.py --out benchmarks/results/cuda_source_h200.json
    python benchmarks/cuda_source_h200.py --examples cuda_row_rms --out $OUT/b.json   # one per call
    python benchmarks/cuda_source_h200.py --merge a.json b.json --out benchmarks/results/cuda_source_h200.json
    python benchmarks/cuda_source_h200.py --dry-run                      # CPU: nvcc checks + plans only

Results of earlier examples in ``--out`` are kept (an interrupted run resumes with the missing ones).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = ("cuda_gemm_bias_relu", "cuda_row_rms", "cuda_inline_softmax")
SPEC_OVERRIDES: dict[str, Path] = {}  # example -> spec copy with a lower tunables.max_configs


def example_paths(name: str) -> tuple[Path, Path]:
    """(kernel, spec): ``<name>.cu`` (C ABI) or ``<name>.py`` (load_inline form)."""
    folder = REPO / "examples" / name
    kernel = folder / f"{name}.cu"
    if not kernel.is_file():
        kernel = folder / f"{name}.py"
    return kernel, SPEC_OVERRIDES.get(name, folder / f"{name}.yaml")


def cap_configs(name: str, max_configs: int | None, work: Path) -> None:
    """Write a spec copy whose ``tunables.max_configs`` is at most ``max_configs`` (fewer candidates per
    autotuning attempt; each is still compiled, checked against the oracle and timed)."""
    import yaml

    spec_path = REPO / "examples" / name / f"{name}.yaml"
    data = yaml.safe_load(spec_path.read_text())
    tunables = data.get("tunables") if isinstance(data, dict) else None
    if not max_configs or not tunables or int(tunables.get("max_configs", 8)) <= max_configs:
        return
    tunables["max_configs"] = max_configs
    copy = work / f"{name}.yaml"
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    SPEC_OVERRIDES[name] = copy


def versions() -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version()}
    for mod in ("torch", "triton", "pydantic"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception as exc:  # noqa: BLE001
            out[mod] = f"unavailable: {exc}"
    try:
        nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=60)
        out["nvcc"] = nvcc.stdout.strip().splitlines()[-1]
    except Exception as exc:  # noqa: BLE001
        out["nvcc"] = f"unavailable: {exc}"
    try:
        import torch

        out["device_name"] = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
    except Exception:  # noqa: BLE001
        out["device_name"] = "unknown"
    return out


def ev_dict(ev: Any) -> dict[str, Any]:
    t = ev.timing
    return {
        "verdict": ev.verdict,
        "message": ev.message[:500],
        "median_ms": t.median_ms if t else None,
        "min_ms": t.min_ms if t else None,
        "max_ms": t.max_ms if t else None,
        "round_medians_ms": (ev.extra or {}).get("round_medians_ms"),
        "max_abs_error": ev.max_abs_error,
        "tflops": ev.tflops,
        "gbps": ev.gbps,
    }


def tunable_values(source: str, spec_path: Path, variant: str) -> dict[str, Any]:
    from kernelpilot.cpp_source.tunables import current_values, spec_tunables
    from kernelpilot.dsl_plugins.cuda.pipeline_stages import cpp_view
    from kernelpilot.spec import load_spec

    tunables = spec_tunables(load_spec(spec_path), variant)
    return current_values(cpp_view(source), tunables.names) if tunables else {}


def run_pipeline(name: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """``kernelpilot optimize`` in a subprocess (exactly what a user runs); returns its JSON summary."""
    kernel, spec = example_paths(name)
    out = work / f"{name}_optimized{kernel.suffix}"
    record = work / f"{name}_run.json"
    command = [
        sys.executable,
        "-m",
        "kernelpilot",
        "optimize",
        "-i",
        str(kernel),
        "-s",
        str(spec),
        "-o",
        str(out),
        "--dsl",
        "cuda",
        "--engine",
        "rules",
        "--device",
        args.device,
        "--variant",
        args.variant,
        "--max-iterations",
        str(args.max_iterations),
        "--max-trials",
        str(args.max_trials),
        "--trials-dir",
        str(work / "trials"),  # a rerun with the same --workdir resumes the trees (no re-measuring)
        "--record",
        str(record),
        "--json",
    ]
    t0 = time.time()
    proc = subprocess.run(command, capture_output=True, text=True, timeout=args.pipeline_timeout)
    result: dict[str, Any] = {
        "command": " ".join(["python", *command[1:]]).replace(str(REPO) + "/", ""),
        "exit_code": proc.returncode,
        "wall_s": round(time.time() - t0, 1),
    }
    if proc.returncode != 0:
        result["error"] = (proc.stderr or proc.stdout).strip()[-3000:]
        return result
    result["summary"] = json.loads(proc.stdout)
    run = json.loads(record.read_text())
    result["issues"] = [
        {k: i.get(k) for k in ("category", "stage", "message", "line")} for i in run.get("issues", [])
    ]
    result["plan"] = run.get("plan")
    result["stage_reports"] = [
        {
            k: s.get(k)
            for k in (
                "stage",
                "engine",
                "status",
                "attempts",
                "input_ms",
                "output_ms",
                "verdicts",
                "rejected",
                "notes",
            )
        }
        for s in run.get("stages", [])
    ]
    result["noise"] = run.get("noise")
    result["optimized_path"] = str(out)
    return result


def side_by_side(name: str, optimized: Path, args: argparse.Namespace) -> dict[str, Any]:
    from kernelpilot.dsl_plugins.cuda.source_executor import CudaSourceExecutor
    from kernelpilot.settings import load_settings
    from kernelpilot.spec import load_spec

    kernel, spec_path = example_paths(name)
    spec = load_spec(spec_path)
    settings = load_settings(spec=spec.tolerance_settings(args.variant), env_file=None)
    ex = CudaSourceExecutor(device=args.device, settings=settings)
    try:
        ex.prepare(kernel, spec, args.variant)
        original, best = kernel.read_text(), optimized.read_text()
        evs = ex.evaluate_side_by_side([original, best], seed=424242, rounds=args.rounds)
    finally:
        ex.close()
    out: dict[str, Any] = {"original": ev_dict(evs[0]), "optimized": ev_dict(evs[1])}
    if evs[0].timing and evs[1].timing and evs[1].correct and evs[0].correct:
        out["speedup"] = evs[0].timing.median_ms / evs[1].timing.median_ms
    out["original_config"] = tunable_values(original, spec_path, args.variant)
    out["optimized_config"] = tunable_values(best, spec_path, args.variant)
    out["restrict_added"] = "__restrict__" in best and "__restrict__" not in original
    return out


def dry_run(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """CPU check of everything before the GPU: nvcc front end, the analysis plan, the autotuning
    batches, and a full sm_90a build (ptxas included) of the first candidates."""
    from kernelpilot.dsl_plugins.cuda.pipeline_stages import (
        CudaAutotuneStage,
        CudaSourceAnalyzer,
        RestrictPointersStage,
    )
    from kernelpilot.dsl_plugins.cuda.source_build import BuildOptions, compile_library
    from kernelpilot.dsl_plugins.cuda.source_executor import CudaSourceExecutor
    from kernelpilot.pipeline.contracts import StageContext
    from kernelpilot.pipeline.planner import make_plan
    from kernelpilot.spec import load_spec

    kernel, spec_path = example_paths(name)
    spec = load_spec(spec_path)
    source = kernel.read_text()
    ex = CudaSourceExecutor(device="cpu")
    ex.prepare(kernel, spec, args.variant)
    problems = ex.validate(source)
    ex.close()
    issues = CudaSourceAnalyzer().analyze(source)
    plan = make_plan(issues, None, {"memory_access", "autotuning"})
    ctx = StageContext("autotuning", "cuda", "cuda", source, source, [], spec, args.variant, None)
    first_batch = CudaAutotuneStage().propose(ctx)
    restricted = RestrictPointersStage().propose(ctx)
    builds = []
    codes = [source, *restricted, *first_batch[: args.dry_builds]]
    if ex.inline:  # nvcc -c of the CUDA strings with torch's headers (the worker's CPU path)
        ex = CudaSourceExecutor(device="cpu")
        ex.prepare(kernel, spec, args.variant)
        for code in codes:
            ev = ex.evaluate(code, seed=0, time_it=False)
            ok = bool(ev.extra.get("compiled"))
            builds.append({"ok": ok, "seconds": ev.extra.get("compile_s"), "log_tail": ev.message[-300:]})
        ex.close()
        codes = []
    with tempfile.TemporaryDirectory(prefix="kp_dry_") as tmp:
        for code in codes:
            res = compile_library(code, Path(tmp), BuildOptions(arch="sm_90a"), kernel.parent)
            builds.append({"ok": res.ok, "seconds": round(res.seconds, 1), "log_tail": res.log[-300:]})
    return {
        "validate": problems,
        "plan": [p.stage for p in plan.stages],
        "autotune_batch": len(first_batch),
        "builds": builds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", nargs="*", default=list(EXAMPLES))
    parser.add_argument("--device", default="cuda", choices=("cuda",))
    parser.add_argument("--variant", default="bench-gpu")
    parser.add_argument(
        "--max-iterations", type=int, default=2, help="attempts per stage (AGENT_MAX_ITERATIONS)"
    )
    parser.add_argument(
        "--max-trials", type=int, default=40, help="evaluations per pipeline run (MAX_TRIALS)"
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="interleaved timing rounds of the final comparison"
    )
    parser.add_argument("--pipeline-timeout", type=float, default=1500.0)
    parser.add_argument(
        "--max-configs",
        type=int,
        default=None,
        help="cap on autotuning candidates per attempt (spec copy with a lower tunables.max_configs)",
    )
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/cuda_source_h200.json")
    parser.add_argument(
        "--workdir", type=Path, default=None, help="trial trees, records, outputs (default: temp)"
    )
    parser.add_argument("--dry-run", action="store_true", help="CPU: nvcc checks, plans, builds; no GPU")
    parser.add_argument(
        "--dry-builds", type=int, default=2, help="autotuning candidates to build in --dry-run"
    )
    parser.add_argument("--fresh", action="store_true", help="ignore results already in --out")
    parser.add_argument(
        "--merge", nargs="+", type=Path, help="merge result files of separate calls into --out"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

    if args.merge:
        merged: dict[str, Any] = {}
        for path in args.merge:
            data = json.loads(path.read_text())
            examples = {**merged.get("examples", {}), **data.get("examples", {})}
            merged = {**merged, **data, "examples": examples}
        args.out.write_text(json.dumps(merged, indent=1, default=str))
        print(f"merged {len(args.merge)} file(s), examples: {', '.join(merged.get('examples', {}))}")
        return 0

    if args.dry_run:
        report = {name: dry_run(name, args) for name in args.examples}
        print(json.dumps(report, indent=1))
        ok = all(not r["validate"] and all(b["ok"] for b in r["builds"]) for r in report.values())
        return 0 if ok else 1

    results: dict[str, Any] = {}
    if args.out.is_file() and not args.fresh:
        results = json.loads(args.out.read_text())
    results.update(
        {
            "benchmark": "cuda_source_pipeline_rules",
            "method": "kernelpilot optimize --dsl cuda --engine rules (analysis-planned stages; every candidate "
            "compiled with nvcc -O3 sm_90a and checked against the PyTorch reference on fresh random inputs; "
            "kept only if faster than the stage input beyond the measured noise), then original vs optimized "
            "re-checked on new inputs and timed interleaved in one worker process: each round is a "
            "triton.testing.do_bench median, the reported time is the median of the round medians",
            "variant": args.variant,
            "versions": versions(),
        }
    )
    results.setdefault("examples", {})
    work = args.workdir or Path(tempfile.mkdtemp(prefix="kp_cuda_source_"))
    work.mkdir(parents=True, exist_ok=True)
    for name in args.examples:
        cap_configs(name, args.max_configs, work)
    if args.max_configs:
        results["max_configs"] = args.max_configs
    for name in args.examples:
        done = results["examples"].get(name, {})
        if done.get("final") and not args.fresh:
            print(f"== {name}: already in {args.out}, skipped (use --fresh to redo)", flush=True)
            continue
        print(f"== {name}", flush=True)
        entry: dict[str, Any] = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
        entry["command"] = " ".join(
            ["python", "benchmarks/cuda_source_h200.py", *(argv if argv is not None else sys.argv[1:])]
        )
        try:
            entry["pipeline"] = run_pipeline(name, args, work)
            optimized = Path(entry["pipeline"].get("optimized_path", ""))
            if entry["pipeline"].get("exit_code") == 0 and optimized.is_file():
                entry["final"] = side_by_side(name, optimized, args)
                entry["optimized_source"] = optimized.read_text()
        except Exception as exc:  # noqa: BLE001 - one failing example never stops the others
            entry["error"] = f"{type(exc).__name__}: {exc}"
        results["examples"][name] = entry
        final = entry.get("final", {})
        print(
            json.dumps(
                {
                    "speedup": final.get("speedup"),
                    "ms": [final.get(k, {}).get("median_ms") for k in ("original", "optimized")],
                    "verdicts": [final.get(k, {}).get("verdict") for k in ("original", "optimized")],
                    "config": final.get("optimized_config"),
                    "error": entry.get("error") or entry.get("pipeline", {}).get("error"),
                }
            ),
            flush=True,
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
