"""The worker protocol for DSLs whose kernel file is a Python ``Model`` (Triton, Gluon, a CUDA
extension built with ``load_inline``, ...).

The oracle and the candidate are both imported as modules and built with the same seed; the oracle's
weights are copied into the candidate; the candidate's forward runs with poisoned allocations after the
free caching-allocator blocks were poisoned; outputs are compared element by element; a correct
candidate is timed.  A DSL adjusts the protocol through :class:`ModelWorkerHooks` (e.g. Triton gives
``@triton.autotune`` a wall-clock timer under its CPU interpreter) instead of copying it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelpilot.worker_kit.compare import compare, flatten, output_bytes
from kernelpilot.worker_kit.model import build_model, copy_parameters, job_inputs, load_module
from kernelpilot.worker_kit.poison import poison_cached_memory, poisoned_allocations
from kernelpilot.worker_kit.serve import classify_error, error_text
from kernelpilot.worker_kit.timing import sync, time_forward, timing_summary


def autotuned_choices(module: Any) -> dict[str, str]:
    """``{kernel: best config}`` for every kernel of a module whose autotuner has chosen one (an object
    with ``best_config`` and ``configs``, as ``@triton.autotune`` makes it); recorded, never required."""
    found = {}
    for name, obj in vars(module).items():
        best = getattr(obj, "best_config", None)
        if best is not None and hasattr(obj, "configs"):
            found[name] = str(best)
    return found


def _nothing(device: str) -> None:
    return None


@dataclass(frozen=True)
class ModelWorkerHooks:
    """What a DSL adds to the protocol.

    ``before_run(device)`` runs once before anything is imported (e.g. install an interpreter timer);
    ``module_extras(module)`` returns what to record about a candidate module after it ran
    (``extra.autotune_choice``).
    """

    before_run: Callable[[str], None] = _nothing
    module_extras: Callable[[Any], dict[str, str]] = autotuned_choices


PLAIN = ModelWorkerHooks()


def _inputs_for(torch: Any, job: dict[str, Any], seed: int, device: str) -> list[Any]:
    return job_inputs(torch, {**job, "seed": int(seed)}, device)


def _save_tensors(torch: Any, path: str, outputs: dict[str, Any]) -> None:
    """Outputs as plain CPU tensors (read back with ``weights_only=True``: no code runs on load)."""
    torch.save({k: [t.detach().to("cpu") for t in flatten(torch, v)] for k, v in outputs.items()}, path)


def _final_check(torch: Any, job: dict[str, Any], model: Any, got: Any, device: str) -> dict[str, Any] | None:
    """Run the candidate on the final inputs (never seen before) and save its outputs for the parent;
    a failure here is the verdict (``None`` when it ran or the parent does not verify)."""
    if job.get("final_seed") is None or not job.get("outputs_path"):
        return None
    try:
        final = model(*_inputs_for(torch, job, job["final_seed"], device))
        sync(torch, device)
        _save_tensors(torch, job["outputs_path"], {"check": got, "final": final})
    except BaseException as exc:  # noqa: BLE001
        return {"verdict": classify_error(exc), "message": "final check: " + error_text(exc), "extra": {}}
    return None


def run_reference(job: dict[str, Any], hooks: ModelWorkerHooks = PLAIN) -> dict[str, Any]:
    """The oracle's outputs on the check and final inputs, for the parent to compare with (no
    candidate code is loaded in this process)."""
    import torch

    device = job["device"]
    hooks.before_run(device)
    sys.path.insert(0, job["kernel_dir"])
    oracle = build_model(torch, load_module(job["oracle_path"], "kp_oracle"), job["variant"], device)
    outputs = {}
    with torch.no_grad():
        for name, seed in (("check", job["seed"]), ("final", job["final_seed"])):
            outputs[name] = oracle(*_inputs_for(torch, job, seed, device))
            sync(torch, device)
    _save_tensors(torch, job["reference_path"], outputs)
    return {"verdict": "reference", "message": "", "extra": {}}


def run_job(job: dict[str, Any], hooks: ModelWorkerHooks = PLAIN) -> dict[str, Any]:
    """Check one candidate ``Model`` against the oracle on seeded inputs; time it if correct.

    With ``final_seed`` and ``outputs_path`` in the job (the parent verifies): the candidate is
    timed on fresh inputs for every call (a rotating pool, never the checked inputs), then run once
    on the final inputs, which it has not seen; its outputs on the check and final inputs are saved
    for the parent, whose verdict replaces whatever this process (candidate code included) claims.
    """
    if job.get("mode") == "reference":
        return run_reference(job, hooks)
    import torch

    hooks.before_run(job["device"])

    device = job["device"]
    variant = job["variant"]
    sys.path.insert(0, job["kernel_dir"])
    result: dict[str, Any] = {"verdict": "runtime_error", "message": "", "extra": {}}

    # --- oracle ---------------------------------------------------------------------------------
    try:
        oracle_mod = load_module(job["oracle_path"], "kp_oracle")
        oracle = build_model(torch, oracle_mod, variant, device)
    except BaseException as exc:  # noqa: BLE001 - reported, not hidden
        return {
            "verdict": "runtime_error",
            "message": f"the oracle ({job['oracle_kind']}) failed to load: {error_text(exc)}",
            "extra": {},
        }

    # --- candidate ------------------------------------------------------------------------------
    try:
        cand_mod = load_module(job["candidate_path"], "kp_candidate")
        model = build_model(torch, cand_mod, variant, device)
        copy_parameters(torch, oracle, model)
    except BaseException as exc:  # noqa: BLE001
        return {
            "verdict": classify_error(exc),  # SyntaxError, or a CompilationError of an extension build
            "message": "import/construct: " + error_text(exc),
            "extra": {},
        }

    inputs = job_inputs(torch, job, device)
    with torch.no_grad():
        try:
            ref = oracle(*[t.clone() for t in inputs])
            sync(torch, device)
        except BaseException as exc:  # noqa: BLE001
            return {
                "verdict": "runtime_error",
                "message": f"the oracle ({job['oracle_kind']}) failed: {error_text(exc)}",
                "extra": {},
            }
        try:
            result["extra"]["poisoned_free_bytes"] = poison_cached_memory(torch, device, ref)
            with poisoned_allocations(torch):
                got = model(*[t.clone() for t in inputs])
                sync(torch, device)
        except BaseException as exc:  # noqa: BLE001
            return {"verdict": classify_error(exc), "message": error_text(exc), "extra": {}}
        try:
            cmp = compare(torch, got, ref, job["rtol"], job["atol"])
        except BaseException as exc:  # noqa: BLE001
            return {
                "verdict": "incorrect",
                "message": f"outputs cannot be compared: {error_text(exc)}",
                "extra": {},
            }
        result.update(
            verdict="correct" if cmp["ok"] else "incorrect",
            message=cmp["message"],
            max_abs_error=cmp.get("max_abs_error"),
            max_rel_error=cmp.get("max_rel_error"),
        )
        result["extra"]["oracle"] = job["oracle_kind"]
        if not cmp["ok"]:
            return result
        if not job.get("time_it", True):
            return _final_check(torch, job, model, got, device) or result

        # --- timing ---------------------------------------------------------------------------
        try:
            if job.get("final_seed") is not None:
                # fresh inputs for every timed call: a pool of distinct input sets used in turn, so
                # an output remembered from the checked call is not what gets timed
                pool = [_inputs_for(torch, job, job["seed"] + 7919 * (k + 1), device) for k in range(4)]
                calls = iter(range(1 << 62))
                timed = lambda: model(*pool[next(calls) % len(pool)])  # noqa: E731
            else:
                run_inputs = list(inputs)
                timed = lambda: model(*run_inputs)  # noqa: E731
            timing = time_forward(torch, timed, device, job.get("warmup_ms", 25), job.get("rep_ms", 100))
        except BaseException as exc:  # noqa: BLE001
            return {**result, "verdict": "runtime_error", "message": "timing failed: " + error_text(exc)}
        failed = _final_check(torch, job, model, got, device)
        if failed:
            return failed
    result["timing"] = timing
    seconds = timing["median_ms"] * 1e-3
    flop = variant.get("flop")
    moved = variant.get("bytes")
    if moved is None:
        moved = sum(t.numel() * t.element_size() for t in inputs) + output_bytes(torch, got)
        result["extra"]["bytes_source"] = "inputs+outputs"
    else:
        result["extra"]["bytes_source"] = "spec"
    result["extra"]["bytes"] = float(moved)
    if seconds > 0:
        result["gbps"] = moved / seconds / 1e9
        if flop:
            result["tflops"] = flop / seconds / 1e12
    if flop and moved:
        result["extra"]["arithmetic_intensity"] = flop / moved
    if device == "cuda":
        result["extra"]["device_name"] = torch.cuda.get_device_name()
    elif device == "xpu":
        result["extra"]["device_name"] = torch.xpu.get_device_name()
    result["extra"]["autotune_choice"] = hooks.module_extras(cand_mod)
    if math.isnan(timing["median_ms"]):
        result["verdict"] = "runtime_error"
        result["message"] = "timing returned NaN"
    return result


def run_side_by_side(job: dict[str, Any], hooks: ModelWorkerHooks = PLAIN) -> dict[str, Any]:
    """Check several kernel files against the oracle, then time them interleaved in one process.

    Interleaving (A B A B ...) spreads clock and thermal drift over all candidates, so their ratio is
    measured side by side rather than minutes apart.
    """
    import torch

    device = job["device"]
    variant = job["variant"]
    sys.path.insert(0, job["kernel_dir"])
    hooks.before_run(device)
    oracle_mod = load_module(job["oracle_path"], "kp_oracle")
    oracle = build_model(torch, oracle_mod, variant, device)
    inputs = job_inputs(torch, job, device)
    with torch.no_grad():
        ref = oracle(*[t.clone() for t in inputs])
    entries: list[dict[str, Any]] = []
    models: list[Any] = []
    modules: list[Any] = []
    for i, path in enumerate(job["candidate_paths"]):
        entry: dict[str, Any] = {"verdict": "runtime_error", "message": "", "extra": {}}
        try:
            mod = load_module(path, f"kp_candidate_{i}")
            model = build_model(torch, mod, variant, device)
            copy_parameters(torch, oracle, model)
            got = None  # the previous candidate's output is freed first, then poisoned with the rest
            poison_cached_memory(torch, device, ref)
            with torch.no_grad(), poisoned_allocations(torch):
                got = model(*[t.clone() for t in inputs])
                sync(torch, device)
            cmp = compare(torch, got, ref, job["rtol"], job["atol"])
            entry.update(
                verdict="correct" if cmp["ok"] else "incorrect",
                message=cmp["message"],
                max_abs_error=cmp.get("max_abs_error"),
                max_rel_error=cmp.get("max_rel_error"),
            )
        except BaseException as exc:  # noqa: BLE001
            entry.update(verdict=classify_error(exc), message=error_text(exc))
            model, mod = None, None
        entries.append(entry)
        models.append(model if entry["verdict"] == "correct" else None)
        modules.append(mod)
    samples: list[list[float]] = [[] for _ in models]
    with torch.no_grad():
        for _ in range(job.get("rounds", 3)):
            for i, model in enumerate(models):
                if model is None:
                    continue
                t = time_forward(
                    torch,
                    lambda m=model: m(*inputs),
                    device,
                    job.get("warmup_ms", 25),
                    job.get("rep_ms", 100),
                )
                samples[i].append(t["median_ms"])
                entries[i]["interpreter"] = t["interpreter"]
    for i, entry in enumerate(entries):
        if samples[i]:
            entry["timing"] = timing_summary(samples[i], entry.pop("interpreter", False))
            entry["extra"]["round_medians_ms"] = samples[i]
        if modules[i] is not None:
            entry["extra"]["autotune_choice"] = hooks.module_extras(modules[i])
    names = {"cuda": lambda: torch.cuda.get_device_name(), "xpu": lambda: torch.xpu.get_device_name()}
    return {"entries": entries, "device_name": names[device]() if device in names else device}
