"""Worker process: import a candidate kernel file, check it against the oracle, time it.

Run as ``python -m kernelpilot.dsl_plugins.triton.worker JOB.json``; it writes ``RESULT.json`` (path in
the job).  It runs in its own process because candidate code is untrusted: a hang, a segfault or an
``os._exit`` there costs one evaluation, never the pipeline.  The parent (``executor.py``) enforces the
timeout and treats a missing result file as a crash.

Correctness protocol (why each step exists):
- inputs are drawn fresh from ``seed`` (normal floats, integers uniform in the spec's range), so a
  candidate cannot memorise outputs;
- both models are built after ``torch.manual_seed(model_seed)`` and the oracle's parameters are then
  copied into the candidate by name, so weights agree even when construction order differs;
- while the candidate runs, ``torch.empty*`` allocations are *poisoned* (NaN for floats, a sentinel for
  integers): an output element the kernel forgot to write stays poisoned and is reported as unwritten;
- right before each checked candidate forward, every free block the CUDA caching allocator holds is
  poisoned the same way (:func:`poison_cached_memory`), so an output allocated where the Python patch
  cannot see it (``torch::empty_like`` in a C++ extension, an aten op) cannot inherit a correct
  result that the oracle, or an earlier candidate, left in a freed block;
- comparison is ``|out - ref| <= atol + rtol * |ref|`` in float64 on every element.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

MODEL_SEED = 1234


def _load_module(path: str, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _torch_dtype(torch: Any, name: str) -> Any:
    return getattr(torch, name)


def make_inputs(torch: Any, variant: dict[str, Any], seed: int, device: str) -> list[Any]:
    """Random inputs for the variant: normal floats, uniform integers in [low, high)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    tensors = []
    for spec in variant["inputs"]:
        dtype = _torch_dtype(torch, spec["dtype"])
        shape = tuple(spec["shape"])
        if dtype.is_floating_point:
            t = torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)
        elif dtype == torch.bool:
            t = torch.randint(0, 2, shape, generator=gen).to(torch.bool)
        else:
            lo, hi = spec["range"] if spec.get("range") else (0, 128)
            t = torch.randint(int(lo), int(hi), shape, generator=gen, dtype=torch.int64).to(dtype)
        tensors.append(t.to(device))
    return tensors


def example_inputs(torch: Any, job: dict[str, Any], seed: int, device: str) -> list[Any]:
    """Inputs from the ORIGINAL kernel file's ``get_example_inputs()`` (spec without ``inputs``).

    Seeded first, so each check still gets fresh inputs; the candidate's own function is never used
    (a candidate must not choose the data it is checked on).
    """
    module = _load_module(job["original_path"], "kp_original_inputs")
    torch.manual_seed(seed)
    values = module.get_example_inputs()
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def job_inputs(torch: Any, job: dict[str, Any], device: str) -> list[Any]:
    if job["variant"]["inputs"]:
        return make_inputs(torch, job["variant"], job["seed"], device)
    return example_inputs(torch, job, job["seed"], device)


def build_model(torch: Any, module: Any, variant: dict[str, Any], device: str) -> Any:
    """``Model(*inits)``; floating parameters cast to the variant dtype like users' harnesses do."""
    if not hasattr(module, "Model"):
        raise AttributeError("the kernel file defines no class Model")
    torch.manual_seed(MODEL_SEED)
    model = module.Model(*variant["init_args"])
    if isinstance(model, torch.nn.Module):
        model = model.to(device)
        if variant.get("dtype") and _torch_dtype(torch, variant["dtype"]).is_floating_point:
            model = model.to(_torch_dtype(torch, variant["dtype"]))
        model.eval()
    return model


def copy_parameters(torch: Any, src: Any, dst: Any) -> int:
    """Copy same-named, same-shaped parameters and buffers from the oracle; returns how many."""
    if not (isinstance(src, torch.nn.Module) and isinstance(dst, torch.nn.Module)):
        return 0
    dst_state = dst.state_dict()
    copied = 0
    with torch.no_grad():
        for name, value in src.state_dict().items():
            if name in dst_state and dst_state[name].shape == value.shape:
                dst_state[name].copy_(value.to(dst_state[name].dtype))
                copied += 1
    return copied


@contextlib.contextmanager
def poisoned_allocations(torch: Any):
    """Make ``torch.empty``-style allocations start as NaN / sentinel so unwritten outputs show up."""
    names = ("empty", "empty_like", "empty_strided")
    originals = {n: getattr(torch, n) for n in names}
    original_new_empty = torch.Tensor.new_empty

    def poison(t: Any) -> Any:
        if t.dtype.is_floating_point:
            t.fill_(float("nan"))
        elif t.dtype == torch.bool:
            t.fill_(True)
        elif t.dtype.is_complex:
            t.fill_(complex(float("nan"), float("nan")))
        else:
            t.fill_(torch.iinfo(t.dtype).max)
        return t

    def wrap(fn: Any) -> Any:
        def inner(*args: Any, **kwargs: Any) -> Any:
            return poison(fn(*args, **kwargs))

        return inner

    try:
        for n, fn in originals.items():
            setattr(torch, n, wrap(fn))
        torch.Tensor.new_empty = lambda self, *a, **k: poison(original_new_empty(self, *a, **k))
        yield
    finally:
        for n, fn in originals.items():
            setattr(torch, n, fn)
        torch.Tensor.new_empty = original_new_empty


def poison_dtype(torch: Any, ref: Any) -> Any:
    """The dtype whose ``iinfo.max`` fills free memory before a candidate runs (see
    :func:`poison_cached_memory`).

    Float-only outputs: ``uint8`` (every byte 0xFF, a NaN in float16/bfloat16/float32/float64 and in
    complex parts).  With integer outputs: the widest of their dtypes, so an unwritten integer element
    reads as the sentinel :func:`compare` looks for; the max of int16/int32/int64 (0x7FFF...) is a NaN in
    every float format as well, so float outputs beside them are still caught."""
    try:
        dtypes = [t.dtype for t in _flatten(torch, ref)]
    except TypeError:
        return torch.uint8
    ints = [d for d in dtypes if not (d.is_floating_point or d.is_complex or d == torch.bool)]
    if not ints:
        return torch.uint8
    return max(ints, key=lambda d: torch.empty((), dtype=d).element_size())


def inactive_blocks(segments: list[dict[str, Any]], device_index: int | None = None) -> list[tuple[int, int]]:
    """``(address, bytes)`` of each free (``inactive``) block in a ``torch.cuda.memory_snapshot()``.

    Blocks awaiting a free on another stream are skipped (that stream may still use them), and so are
    expandable segments.  Addresses come from the block when the snapshot has them, else from the
    segment's base plus the sizes of the blocks before (a segment's blocks are listed in address
    order)."""
    found = []
    for seg in segments:
        if device_index is not None and seg.get("device", device_index) != device_index:
            continue
        if seg.get("is_expandable"):
            continue  # its free blocks may lie in pages that are not mapped; writing them would fault
        address = int(seg["address"])
        for block in seg.get("blocks", []):
            start = int(block.get("address", address))
            size = int(block["size"])
            if block.get("state") == "inactive" and size > 0:
                found.append((start, size))
            address = start + size
    return found


class _DeviceBytes:
    """``__cuda_array_interface__`` over ``size`` bytes at ``address`` (``torch.as_tensor`` aliases it)."""

    def __init__(self, address: int, size: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (size,),
            "typestr": "|u1",
            "data": (address, False),
            "strides": None,
            "version": 2,
        }


def _cuda_free_blocks(torch: Any) -> list[tuple[int, int]]:
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") + os.environ.get("PYTORCH_ALLOC_CONF", "")
    if "expandable_segments:true" in conf.replace(" ", "").lower():
        return []  # free blocks may lie in unmapped pages there; writing them would fault
    return inactive_blocks(torch.cuda.memory_snapshot(), torch.cuda.current_device())


def _cuda_block_view(torch: Any, address: int, size: int) -> Any:
    return torch.as_tensor(_DeviceBytes(address, size), device="cuda")


# device -> (free blocks of its caching allocator, a uint8 tensor aliasing one block)
FREE_MEMORY: dict[str, tuple[Any, Any]] = {"cuda": (_cuda_free_blocks, _cuda_block_view)}


def poison_cached_memory(torch: Any, device: str, ref: Any) -> int:
    """Fill every free block of the device's caching allocator with the poison of :func:`poison_dtype`;
    returns the bytes filled (0 where the device has no such allocator, e.g. ``cpu``).

    Why: :func:`poisoned_allocations` patches the *Python* ``torch.empty*``.  An output allocated in C++
    (``torch::empty_like`` in a ``load_inline`` extension) or by an aten op comes straight from the
    caching allocator, whose freed blocks may hold the correct answer -- the oracle's intermediates,
    or in :func:`run_side_by_side` the previous candidate's output for the same inputs.  A kernel that
    never writes its output would then be judged correct.  After this, every block the candidate can
    be handed without a fresh ``cudaMalloc`` reads as NaN / the integer sentinel, and :func:`compare`
    reports the elements it did not write as "never written".

    The blocks are written in place through an aliasing view (``__cuda_array_interface__``), not by
    allocating and freeing poisoned tensors: that leaves the allocator's block layout as it was and
    reaches every free block, whereas allocate-and-free covers only the blocks best-fit happens to
    return.  The oracle still runs first (the poison's dtype follows its outputs); running the
    candidate first instead would not cover side-by-side rounds, where earlier candidates' outputs
    are the stale data.  Cost: one fill per free block plus two synchronisations, microseconds to a
    few milliseconds.  Best effort: a snapshot that fails (another allocator backend) poisons nothing.
    """
    hooks = FREE_MEMORY.get(device)
    if hooks is None:
        return 0
    free_blocks, block_view = hooks
    dtype = poison_dtype(torch, ref)
    value = torch.iinfo(dtype).max
    _sync(torch, device)  # blocks freed on other streams are idle from here on
    try:
        blocks = free_blocks(torch)
    except (RuntimeError, AttributeError):
        return 0
    width = torch.empty((), dtype=dtype).element_size()
    filled = 0
    for address, size in blocks:
        usable = size - size % width
        if usable <= 0:
            continue
        block_view(torch, address, usable).view(dtype).fill_(value)
        filled += usable
    _sync(torch, device)
    return filled


def _flatten(torch: Any, out: Any) -> list[Any]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        items = []
        for o in out:
            items.extend(_flatten(torch, o))
        return items
    if isinstance(out, dict):
        return _flatten(torch, list(out.values()))
    if isinstance(out, (int, float)):
        return [torch.tensor(out)]
    raise TypeError(f"forward returned {type(out).__name__}; expected tensors")


def compare(torch: Any, got: Any, ref: Any, rtol: float, atol: float) -> dict[str, Any]:
    """Element-wise check of every output; reports the worst errors and unwritten (poisoned) elements."""
    got_list, ref_list = _flatten(torch, got), _flatten(torch, ref)
    if len(got_list) != len(ref_list):
        return {
            "ok": False,
            "message": f"forward returned {len(got_list)} tensors, the oracle {len(ref_list)}",
        }
    max_abs = 0.0
    max_rel = 0.0
    problems = []
    for i, (g, r) in enumerate(zip(got_list, ref_list, strict=True)):
        if tuple(g.shape) != tuple(r.shape):
            problems.append(f"output {i}: shape {tuple(g.shape)} != oracle {tuple(r.shape)}")
            continue
        g64 = g.detach().to("cpu", torch.float64)
        r64 = r.detach().to("cpu", torch.float64)
        ref_nan = torch.isnan(r64)
        unwritten = int((torch.isnan(g64) & ~ref_nan).sum())
        if not g.dtype.is_floating_point and g.dtype != torch.bool:
            sentinel = torch.iinfo(g.dtype).max
            unwritten = max(0, int((g.to("cpu") == sentinel).sum()) - int((r.to("cpu") == sentinel).sum()))
        diff = (g64 - r64).abs()
        diff = torch.where(ref_nan & torch.isnan(g64), torch.zeros_like(diff), diff)
        finite = torch.isfinite(diff)
        if finite.any():
            max_abs = max(max_abs, float(diff[finite].max()))
            rel = diff[finite] / r64[finite].abs().clamp_min(1e-30)
            max_rel = max(max_rel, float(rel.max()))
        bad = ~(diff <= atol + rtol * r64.abs())
        bad &= ~(ref_nan & torch.isnan(g64))
        nbad = int(bad.sum())
        if unwritten > 0:
            problems.append(f"output {i}: {unwritten} of {g.numel()} elements never written (still poisoned)")
        elif nbad:
            idx = int(bad.flatten().nonzero()[0])
            problems.append(
                f"output {i}: {nbad} of {g.numel()} elements outside rtol={rtol} atol={atol}; "
                f"first at flat index {idx}: got {float(g64.flatten()[idx])!r}, expected {float(r64.flatten()[idx])!r}"
            )
    return {
        "ok": not problems,
        "message": "; ".join(problems) if problems else "matches the oracle",
        "max_abs_error": max_abs,
        "max_rel_error": max_rel,
    }


def output_bytes(torch: Any, out: Any) -> int:
    return sum(t.numel() * t.element_size() for t in _flatten(torch, out))


def _sync(torch: Any, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "xpu":
        torch.xpu.synchronize()


def time_forward(torch: Any, fn: Any, device: str, warmup_ms: int, rep_ms: int) -> dict[str, Any]:
    """Median/min/max over ``do_bench`` samples on a GPU; a wall-clock loop under the interpreter."""
    if device == "cpu":
        samples = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e3)
        interpreter = True
    else:
        import triton.testing

        try:
            raw = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
            samples = [float(x) for x in raw]
        except (TypeError, ValueError, AssertionError):  # older Triton without return_mode="all"
            raw = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=[0.5, 0.0, 1.0])
            samples = [float(x) for x in raw]
        interpreter = False
    return timing_summary(samples, interpreter)


def timing_summary(samples: list[float], interpreter: bool = False) -> dict[str, Any]:
    """The ``timing`` record of a verdict (ProgramResult schema) from per-run or per-round times;
    every DSL's worker writes it through here so the field names cannot drift apart."""
    return {
        "median_ms": statistics.median(samples),
        "min_ms": min(samples),
        "max_ms": max(samples),
        "repetitions": len(samples),
        "interpreter": interpreter,
    }


def _classify(exc: BaseException) -> str:
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {
        "CompilationError",
        "CompileTimeAssertionFailure",
        "SyntaxError",
        "UnsupportedLanguageConstruct",
    }:
        return "compile_error"
    return "runtime_error"


def _error_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    tb = traceback.extract_tb(exc.__traceback__)
    frames = [
        f for f in tb if "candidate" in f.filename or f.filename.endswith(".py") and "kp_job" in f.filename
    ]
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return (text + where)[-4000:]


def interpreter_autotune_timer() -> None:
    """Under ``TRITON_INTERPRET=1`` there is no GPU driver for ``@triton.autotune`` to benchmark with;
    give it a wall-clock timer so autotuned kernels still run (every config once) on the CPU."""
    import triton.runtime.autotuner as autotuner

    def wall_clock_bench(fn: Any, quantiles: Any = None, **_: Any) -> Any:
        t0 = time.perf_counter()
        fn()
        ms = (time.perf_counter() - t0) * 1e3
        return [ms] * len(quantiles) if quantiles else ms

    autotuner.Autotuner.do_bench = property(lambda self: wall_clock_bench)  # type: ignore[method-assign,assignment]


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    import torch

    if job["device"] == "cpu":
        interpreter_autotune_timer()

    device = job["device"]
    variant = job["variant"]
    sys.path.insert(0, job["kernel_dir"])
    result: dict[str, Any] = {"verdict": "runtime_error", "message": "", "extra": {}}

    # --- oracle ---------------------------------------------------------------------------------
    try:
        oracle_mod = _load_module(job["oracle_path"], "kp_oracle")
        oracle = build_model(torch, oracle_mod, variant, device)
    except BaseException as exc:  # noqa: BLE001 - reported, not hidden
        return {
            "verdict": "runtime_error",
            "message": f"the oracle ({job['oracle_kind']}) failed to load: {_error_text(exc)}",
            "extra": {},
        }

    # --- candidate ------------------------------------------------------------------------------
    try:
        cand_mod = _load_module(job["candidate_path"], "kp_candidate")
        model = build_model(torch, cand_mod, variant, device)
        copy_parameters(torch, oracle, model)
    except BaseException as exc:  # noqa: BLE001
        return {
            "verdict": _classify(exc),  # SyntaxError, or a CompilationError of an extension build
            "message": "import/construct: " + _error_text(exc),
            "extra": {},
        }

    inputs = job_inputs(torch, job, device)
    with torch.no_grad():
        try:
            ref = oracle(*[t.clone() for t in inputs])
            _sync(torch, device)
        except BaseException as exc:  # noqa: BLE001
            return {
                "verdict": "runtime_error",
                "message": f"the oracle ({job['oracle_kind']}) failed: {_error_text(exc)}",
                "extra": {},
            }
        try:
            result["extra"]["poisoned_free_bytes"] = poison_cached_memory(torch, device, ref)
            with poisoned_allocations(torch):
                got = model(*[t.clone() for t in inputs])
                _sync(torch, device)
        except BaseException as exc:  # noqa: BLE001
            return {"verdict": _classify(exc), "message": _error_text(exc), "extra": {}}
        try:
            cmp = compare(torch, got, ref, job["rtol"], job["atol"])
        except BaseException as exc:  # noqa: BLE001
            return {
                "verdict": "incorrect",
                "message": f"outputs cannot be compared: {_error_text(exc)}",
                "extra": {},
            }
        result.update(
            verdict="correct" if cmp["ok"] else "incorrect",
            message=cmp["message"],
            max_abs_error=cmp.get("max_abs_error"),
            max_rel_error=cmp.get("max_rel_error"),
        )
        result["extra"]["oracle"] = job["oracle_kind"]
        if not cmp["ok"] or not job.get("time_it", True):
            return result

        # --- timing ---------------------------------------------------------------------------
        try:
            run_inputs = list(inputs)
            timing = time_forward(
                torch, lambda: model(*run_inputs), device, job.get("warmup_ms", 25), job.get("rep_ms", 100)
            )
        except BaseException as exc:  # noqa: BLE001
            return {**result, "verdict": "runtime_error", "message": "timing failed: " + _error_text(exc)}
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
    result["extra"]["autotune_choice"] = autotuned_choices(cand_mod)
    if math.isnan(timing["median_ms"]):
        result["verdict"] = "runtime_error"
        result["message"] = "timing returned NaN"
    return result


def autotuned_choices(module: Any) -> dict[str, str]:
    """``{kernel: best config}`` for every ``@triton.autotune`` kernel of a module that has run."""
    found = {}
    for name, obj in vars(module).items():
        best = getattr(obj, "best_config", None)
        if best is not None and hasattr(obj, "configs"):
            found[name] = str(best)
    return found


def run_side_by_side(job: dict[str, Any]) -> dict[str, Any]:
    """Check several kernel files against the oracle, then time them interleaved in one process.

    Interleaving (A B A B ...) spreads clock and thermal drift over all candidates, so their ratio is
    measured side by side rather than minutes apart.
    """
    import torch

    device = job["device"]
    variant = job["variant"]
    sys.path.insert(0, job["kernel_dir"])
    if device == "cpu":
        interpreter_autotune_timer()
    oracle_mod = _load_module(job["oracle_path"], "kp_oracle")
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
            mod = _load_module(path, f"kp_candidate_{i}")
            model = build_model(torch, mod, variant, device)
            copy_parameters(torch, oracle, model)
            got = None  # the previous candidate's output is freed first, then poisoned with the rest
            poison_cached_memory(torch, device, ref)
            with torch.no_grad(), poisoned_allocations(torch):
                got = model(*[t.clone() for t in inputs])
                _sync(torch, device)
            cmp = compare(torch, got, ref, job["rtol"], job["atol"])
            entry.update(
                verdict="correct" if cmp["ok"] else "incorrect",
                message=cmp["message"],
                max_abs_error=cmp.get("max_abs_error"),
                max_rel_error=cmp.get("max_rel_error"),
            )
        except BaseException as exc:  # noqa: BLE001
            entry.update(verdict=_classify(exc), message=_error_text(exc))
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
            entry["extra"]["autotune_choice"] = autotuned_choices(modules[i])
    names = {"cuda": lambda: torch.cuda.get_device_name(), "xpu": lambda: torch.xpu.get_device_name()}
    return {"entries": entries, "device_name": names[device]() if device in names else device}


def serve_job(argv: list[str], run_job: Any, run_side_by_side: Any) -> int:
    """Worker entry shared by every DSL's worker: read the job file, run it, always write a verdict.

    Whatever happens inside (import error, compile failure, CUDA error), the parent gets a result file,
    so a broken candidate is a verdict, never a hang or a lost evaluation.
    """
    job = json.loads(Path(argv[0]).read_text())
    try:
        result = run_side_by_side(job) if job.get("mode") == "side_by_side" else run_job(job)
    except BaseException as exc:  # noqa: BLE001 - the parent must always get a verdict
        result = {"verdict": "runtime_error", "message": "worker error: " + _error_text(exc), "extra": {}}
    Path(job["result_path"]).write_text(json.dumps(result, default=float))
    return 0


def exit_without_teardown(code: int) -> None:
    """End a worker process once its result file is written, skipping interpreter teardown: some GPU
    runtimes hang or crash at exit, which would turn a finished evaluation into a timeout."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    return serve_job(sys.argv[1:] if argv is None else argv, run_job, run_side_by_side)


if __name__ == "__main__":
    sys.stdout.flush()
    exit_without_teardown(main())
