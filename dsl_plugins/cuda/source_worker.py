"""Worker process for CUDA source kernels: nvcc build, check against the oracle, time.

Run as ``python -m kernelpilot.dsl_plugins.cuda.source_worker JOB.json``; writes the result JSON named
in the job.  A separate process because candidate code is untrusted: an illegal memory access poisons
the CUDA context, a hang must be killable, a segfault in ``kp_forward`` must cost one evaluation only.

Inputs, the oracle, output poisoning, comparison and timing are the core worker kit's (one protocol for
every DSL, see :mod:`kernelpilot.worker_kit`); what differs is how the candidate runs:
it is compiled with nvcc into a shared library and called through the C ABI of
``kernelpilot_cuda.hpp`` (inputs, reference parameters, pre-poisoned outputs).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from kernelpilot.dsl_plugins.cuda.source_abi import load_library, tensor_array
from kernelpilot.dsl_plugins.cuda.source_build import (
    DEFAULT_ARCH,
    BuildOptions,
    arch_for_capability,
    compile_library,
)
from kernelpilot.worker_kit.compare import compare, flatten
from kernelpilot.worker_kit.model import build_model, load_module, make_inputs
from kernelpilot.worker_kit.poison import poisoned_allocations
from kernelpilot.worker_kit.serve import error_text, exit_without_teardown, serve_job
from kernelpilot.worker_kit.timing import time_forward, timing_summary


def build_options(job: dict[str, Any], arch: str) -> BuildOptions:
    build = job.get("build") or {}
    return BuildOptions(
        arch=arch,
        nvcc=build.get("nvcc"),
        defines=dict(build.get("defines") or {}),
        extra_flags=list(build.get("extra_flags") or []),
        timeout_s=float(build.get("timeout_s", 300.0)),
    )


def choose_arch(job: dict[str, Any]) -> str:
    """The job's arch, else the GPU's (``sm_90a`` on an H200), else sm_90a for compile-only runs."""
    arch = (job.get("build") or {}).get("arch")
    if arch:
        return str(arch)
    if job["device"] == "cuda":
        import torch

        return arch_for_capability(*torch.cuda.get_device_capability())
    return DEFAULT_ARCH


def compile_candidate(job: dict[str, Any], path: str, arch: str) -> dict[str, Any]:
    source = Path(path).read_text(encoding="utf-8")
    result = compile_library(
        source, Path(job["build"]["cache_dir"]), build_options(job, arch), Path(job["kernel_dir"])
    )
    return {
        "ok": result.ok,
        "library": str(result.output) if result.output else None,
        "log": result.log,
        "cached": result.cached,
        "seconds": result.seconds,
        "command": " ".join(result.command),
    }


class SourceKernel:
    """Calls ``kp_forward`` with inputs, the oracle's parameters and fresh outputs."""

    def __init__(self, torch: Any, library: str, params: list[Any], templates: list[Any]) -> None:
        self.torch = torch
        self.lib, self.forward = load_library(Path(library))
        self.params = params
        self.templates = templates

    def allocate_outputs(self) -> list[Any]:
        # torch.empty: under the worker's poisoned_allocations these start as NaN / int max
        return [self.torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in self.templates]

    def launcher(self, inputs: list[Any]) -> tuple[Any, list[Any]]:
        """A zero-argument callable that launches once on fixed buffers, and those output buffers."""
        ins = [t.contiguous() for t in inputs]
        outs = self.allocate_outputs()
        tensors = ins + self.params + outs
        array = tensor_array(tensors)
        torch = self.torch

        on_gpu = any(t.is_cuda for t in tensors)

        def launch() -> None:
            # torch's current stream (0 = the legacy default stream); host tensors (the ABI contract
            # test) get no stream
            stream = torch.cuda.current_stream().cuda_stream if on_gpu else None
            code = self.forward(array, len(tensors), stream)
            if code != 0:
                raise RuntimeError(f"kp_forward returned {code} (a cudaError_t code if non-zero)")

        launch.keepalive = (ins, tensors, array)  # type: ignore[attr-defined]
        return launch, outs


def oracle_parameters(torch: Any, oracle: Any) -> list[Any]:
    if not isinstance(oracle, torch.nn.Module):
        return []
    return [v.detach().clone().contiguous() for v in oracle.state_dict().values()]


def metrics(
    torch: Any, variant: dict[str, Any], inputs: list[Any], outs: list[Any], ms: float
) -> dict[str, Any]:
    seconds = ms * 1e-3
    flop = variant.get("flop")
    moved = variant.get("bytes")
    extra: dict[str, Any] = {}
    if moved is None:
        moved = sum(t.numel() * t.element_size() for t in inputs + outs)
        extra["bytes_source"] = "inputs+outputs"
    else:
        extra["bytes_source"] = "spec"
    extra["bytes"] = float(moved)
    out: dict[str, Any] = {"extra": extra}
    if seconds > 0:
        out["gbps"] = moved / seconds / 1e9
        if flop:
            out["tflops"] = flop / seconds / 1e12
    if flop and moved:
        extra["arithmetic_intensity"] = flop / moved
    return out


def _setup(job: dict[str, Any]) -> tuple[Any, Any, list[Any], Any]:
    import torch

    device = job["device"]
    sys.path.insert(0, job["kernel_dir"])
    oracle_mod = load_module(job["oracle_path"], "kp_oracle")
    oracle = build_model(torch, oracle_mod, job["variant"], device)
    inputs = make_inputs(torch, job["variant"], job["seed"], device)
    with torch.no_grad():
        ref = oracle(*[t.clone() for t in inputs])
        torch.cuda.synchronize()
    return torch, oracle, inputs, ref


def check(
    torch: Any, kernel: SourceKernel, inputs: list[Any], ref: Any, job: dict[str, Any]
) -> dict[str, Any]:
    with torch.no_grad(), poisoned_allocations(torch):
        launch, outs = kernel.launcher([t.clone() for t in inputs])
    launch()
    torch.cuda.synchronize()
    cmp = compare(torch, outs, ref, job["rtol"], job["atol"])
    return {
        "verdict": "correct" if cmp["ok"] else "incorrect",
        "message": cmp["message"],
        "max_abs_error": cmp.get("max_abs_error"),
        "max_rel_error": cmp.get("max_rel_error"),
    }


def not_runnable(job: dict[str, Any], build: dict[str, Any]) -> dict[str, Any] | None:
    if not build["ok"]:
        return {"verdict": "compile_error", "message": build["log"], "extra": {"nvcc": build["command"]}}
    if job["device"] != "cuda":
        return {
            "verdict": "runtime_error",
            "message": f"compiled with nvcc, but a CUDA source kernel runs only on device 'cuda' "
            f"(this run uses {job['device']!r})",
            "extra": {"compiled": True, "nvcc": build["command"]},
        }
    return None


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    arch = choose_arch(job)
    build = compile_candidate(job, job["candidate_paths"][0], arch)
    if job.get("mode") == "build_only":  # the executor's parallel prebuild: compile, nothing runs
        if not build["ok"]:
            return {"verdict": "compile_error", "message": build["log"]}
        return {"verdict": "built", "message": "", "extra": {"compile_s": build["seconds"]}}
    early = not_runnable(job, build)
    if early is not None:
        return early
    torch, oracle, inputs, ref = _setup(job)
    result: dict[str, Any] = {
        "extra": {"arch": arch, "compile_s": build["seconds"], "ptxas": build["log"][-1500:]}
    }
    try:
        kernel = SourceKernel(torch, build["library"], oracle_parameters(torch, oracle), flatten(torch, ref))
        result.update(check(torch, kernel, inputs, ref, job))
    except BaseException as exc:  # noqa: BLE001 - reported as this candidate's verdict
        return {"verdict": "runtime_error", "message": error_text(exc), "extra": result["extra"]}
    result["extra"]["oracle"] = job["oracle_kind"]
    if result["verdict"] != "correct" or not job.get("time_it", True):
        return result
    try:
        launch, outs = kernel.launcher(inputs)
        timing = time_forward(torch, launch, "cuda", job.get("warmup_ms", 25), job.get("rep_ms", 100))
    except BaseException as exc:  # noqa: BLE001
        return {**result, "verdict": "runtime_error", "message": "timing failed: " + error_text(exc)}
    result["timing"] = timing
    m = metrics(torch, job["variant"], inputs + kernel.params, outs, timing["median_ms"])
    result["extra"].update(m.pop("extra"))
    result.update(m)
    result["extra"]["device_name"] = torch.cuda.get_device_name()
    if math.isnan(timing["median_ms"]):
        result.update(verdict="runtime_error", message="timing returned NaN")
    return result


def run_side_by_side(job: dict[str, Any]) -> dict[str, Any]:
    """Check every candidate on the same inputs, then time them interleaved (A B A B ...) in one process."""
    arch = choose_arch(job)
    builds = [compile_candidate(job, p, arch) for p in job["candidate_paths"]]
    entries: list[dict[str, Any]] = []
    launches: list[Any] = []
    torch = oracle = inputs = ref = None
    for build in builds:
        early = not_runnable(job, build)
        if early is not None:
            entries.append(early)
            launches.append(None)
            continue
        if torch is None:
            torch, oracle, inputs, ref = _setup(job)
        entry: dict[str, Any] = {"extra": {"arch": arch, "compile_s": build["seconds"]}}
        try:
            kernel = SourceKernel(
                torch, build["library"], oracle_parameters(torch, oracle), flatten(torch, ref)
            )
            entry.update(check(torch, kernel, inputs, ref, job))
            launch = kernel.launcher(inputs)[0] if entry["verdict"] == "correct" else None
        except BaseException as exc:  # noqa: BLE001
            entry.update(verdict="runtime_error", message=error_text(exc))
            launch = None
        entries.append(entry)
        launches.append(launch)
    samples: list[list[float]] = [[] for _ in launches]
    for _ in range(int(job.get("rounds", 3))):
        for i, launch in enumerate(launches):
            if launch is not None:
                t = time_forward(torch, launch, "cuda", job.get("warmup_ms", 25), job.get("rep_ms", 100))
                samples[i].append(t["median_ms"])
    for entry, s in zip(entries, samples, strict=True):
        if s:
            entry["timing"] = timing_summary(s)
            entry["extra"]["round_medians_ms"] = s
    device_name = torch.cuda.get_device_name() if torch is not None else job["device"]
    return {"entries": entries, "device_name": device_name}


def main(argv: list[str] | None = None) -> int:
    return serve_job(sys.argv[1:] if argv is None else argv, run_job, run_side_by_side)


if __name__ == "__main__":
    exit_without_teardown(main())
