"""Worker process for SYCL source kernels: icpx build, run through the file I/O contract, check, time.

Run as ``python -m kernelpilot.dsl_plugins.sycl.source_worker JOB.json``.  The kernel runs in its own
program (kernelpilot's runner + the kernel file, built by icpx); tensors cross over as files (see
:mod:`.source_io`).  Inputs, oracle, poisoning and comparison are the core worker kit's, so every DSL is
checked the same way; the oracle runs on the CPU with PyTorch.  Timings are the runner's wall-clock
times of whole ``kp_forward`` calls followed by ``queue::wait`` (median over ``reps``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kernelpilot.dsl_plugins.sycl.source_io import (
    read_outputs,
    read_result,
    run_program,
    runner_command,
    write_inputs,
)
from kernelpilot.worker_kit.compare import compare, flatten
from kernelpilot.worker_kit.model import build_model, load_module, make_inputs
from kernelpilot.worker_kit.poison import poisoned_allocations
from kernelpilot.worker_kit.serve import serve_job
from kernelpilot.worker_kit.timing import timing_summary

EXIT_CONTRACT = 2
EXIT_KERNEL_STATUS = 4


def build_options(job: dict[str, Any]) -> Any:
    from kernelpilot.dsl_plugins.sycl.source_build import SyclBuildOptions

    b = job.get("build") or {}
    return SyclBuildOptions(
        icpx=b.get("icpx"),
        aot_device=b.get("aot_device"),
        grf_mode=b.get("grf_mode"),
        defines=dict(b.get("defines") or {}),
        extra_flags=list(b.get("extra_flags") or []),
        timeout_s=float(b.get("timeout_s", 600.0)),
    )


def compile_candidate(job: dict[str, Any], path: str) -> dict[str, Any]:
    from kernelpilot.dsl_plugins.sycl.source_build import compile_program

    result = compile_program(
        Path(path).read_text(encoding="utf-8"),
        Path(job["build"]["cache_dir"]),
        build_options(job),
        Path(job["kernel_dir"]),
    )
    return {
        "ok": result.ok,
        "program": str(result.output) if result.output else None,
        "log": result.log,
        "seconds": result.seconds,
        "command": " ".join(result.command),
    }


def prepare_tensors(job: dict[str, Any]) -> tuple[Any, list[tuple[str, str, Any]], Any]:
    """Inputs (seeded), the oracle's parameters and its result, and poisoned output buffers -- on the CPU."""
    import torch

    sys.path.insert(0, job["kernel_dir"])
    oracle_mod = load_module(job["oracle_path"], "kp_oracle")
    oracle = build_model(torch, oracle_mod, job["variant"], "cpu")
    inputs = make_inputs(torch, job["variant"], job["seed"], "cpu")
    with torch.no_grad():
        ref = oracle(*[t.clone() for t in inputs])
    names = [i["name"] for i in job["variant"]["inputs"]]
    tensors: list[tuple[str, str, Any]] = [(n, "input", t) for n, t in zip(names, inputs, strict=True)]
    if isinstance(oracle, torch.nn.Module):
        tensors += [(n, "param", v.detach().contiguous()) for n, v in oracle.state_dict().items()]
    with poisoned_allocations(torch):
        for i, r in enumerate(flatten(torch, ref)):
            tensors.append((f"out{i}", "output", torch.empty(r.shape, dtype=r.dtype)))
    return torch, tensors, ref


def evaluate_program(
    job: dict[str, Any], program: Path, work: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run one built runner program on fresh inputs and judge it.  Also what the contract test drives
    with a host-only C++ program (no SYCL) that obeys the same file contract."""
    torch, tensors, ref = prepare_tensors(job)
    entries = write_inputs(work / "in", tensors)
    out_dir = work / "out"
    command = runner_command(
        program, work / "in", out_dir, int(job.get("warmup", 3)), int(job.get("reps", 20))
    )
    outcome = run_program(command, float(job.get("run_timeout_s", 300.0)), env)
    if outcome.timed_out:
        return {"verdict": "timeout", "message": outcome.stderr, "extra": {}}
    if outcome.returncode == EXIT_CONTRACT:
        return {
            "verdict": "runtime_error",
            "message": f"runner rejected the I/O contract: {outcome.stderr}",
            "extra": {},
        }
    if outcome.returncode not in (0, EXIT_KERNEL_STATUS):
        return {
            "verdict": "runtime_error",
            "message": f"program crashed (exit {outcome.returncode}): {outcome.stderr}",
            "extra": {},
        }
    result = read_result(out_dir)
    if result.get("status", 0) != 0:
        return {"verdict": "runtime_error", "message": f"kp_forward returned {result['status']}", "extra": {}}
    outs = read_outputs(out_dir, entries)
    cmp = compare(torch, outs, ref, job["rtol"], job["atol"])
    data: dict[str, Any] = {
        "verdict": "correct" if cmp["ok"] else "incorrect",
        "message": cmp["message"],
        "max_abs_error": cmp.get("max_abs_error"),
        "max_rel_error": cmp.get("max_rel_error"),
        "extra": {"device_name": result.get("device"), "oracle": job.get("oracle_kind", "")},
    }
    samples = [float(x) for x in result.get("samples_ms", [])]
    if cmp["ok"] and samples and job.get("time_it", True):
        data["timing"] = timing_summary(samples)
        seconds = data["timing"]["median_ms"] * 1e-3
        moved = job["variant"].get("bytes") or sum(e.nbytes for e in entries)
        if seconds > 0:
            data["gbps"] = moved / seconds / 1e9
            if job["variant"].get("flop"):
                data["tflops"] = job["variant"]["flop"] / seconds / 1e12
    return data


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    from kernelpilot.dsl_plugins.sycl.source_build import run_env

    build = compile_candidate(job, job["candidate_paths"][0])
    if not build["ok"]:
        return {"verdict": "compile_error", "message": build["log"], "extra": {"icpx": build["command"]}}
    import os

    env = {**os.environ, **run_env(build_options(job))}
    result = evaluate_program(job, Path(build["program"]), Path(job["result_path"]).parent / "run", env)
    result.setdefault("extra", {})["compile_s"] = build["seconds"]
    return result


def run_side_by_side(job: dict[str, Any]) -> dict[str, Any]:
    """Check each candidate, then time them in interleaved rounds (A B A B ...)."""
    import os

    from kernelpilot.dsl_plugins.sycl.source_build import run_env

    env = {**os.environ, **run_env(build_options(job))}
    base = Path(job["result_path"]).parent
    entries: list[dict[str, Any]] = []
    programs: list[Path | None] = []
    for i, path in enumerate(job["candidate_paths"]):
        build = compile_candidate(job, path)
        if not build["ok"]:
            entries.append({"verdict": "compile_error", "message": build["log"], "extra": {}})
            programs.append(None)
            continue
        entry = evaluate_program({**job, "time_it": False}, Path(build["program"]), base / f"check{i}", env)
        entries.append(entry)
        programs.append(Path(build["program"]) if entry["verdict"] == "correct" else None)
    samples: list[list[float]] = [[] for _ in programs]
    for r in range(int(job.get("rounds", 3))):
        for i, program in enumerate(programs):
            if program is not None:
                timed = evaluate_program(job, program, base / f"round{r}_{i}", env)
                if timed.get("timing"):
                    samples[i].append(timed["timing"]["median_ms"])
    for entry, s in zip(entries, samples, strict=True):
        if s:
            entry["timing"] = timing_summary(s)
            entry.setdefault("extra", {})["round_medians_ms"] = s
    return {
        "entries": entries,
        "device_name": next((e["extra"].get("device_name") for e in entries if e.get("extra")), None),
    }


def main(argv: list[str] | None = None) -> int:
    return serve_job(sys.argv[1:] if argv is None else argv, run_job, run_side_by_side)


if __name__ == "__main__":
    raise SystemExit(main())
