"""Kernel files, the oracle, inputs and models inside a worker process.

Why each step exists:

- inputs are drawn fresh from ``seed`` (normal floats, integers uniform in the spec's range), so a
  candidate cannot memorise outputs;
- both models are built after ``torch.manual_seed(MODEL_SEED)`` and the oracle's parameters are then
  copied into the candidate by name, so weights agree even when construction order differs.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

MODEL_SEED = 1234


def load_module(path: str, name: str) -> Any:
    """Import the Python file at ``path`` as module ``name`` (registered in ``sys.modules``)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def torch_dtype(torch: Any, name: str) -> Any:
    return getattr(torch, name)


def make_inputs(torch: Any, variant: dict[str, Any], seed: int, device: str) -> list[Any]:
    """Random inputs for the variant: normal floats, uniform integers in [low, high)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    tensors = []
    for spec in variant["inputs"]:
        dtype = torch_dtype(torch, spec["dtype"])
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
    module = load_module(job["original_path"], "kp_original_inputs")
    make = example_inputs_function(module)
    if make is None:
        raise AttributeError(
            f"{job['original_path']} has no get_example_inputs() (module function or Model method) and "
            "the spec variant lists no inputs"
        )
    torch.manual_seed(seed)
    values = make()
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def example_inputs_function(module: Any) -> Any | None:
    """``get_example_inputs`` at module level, or a static/class method of ``Model`` (Xe-Forge's kernels
    define it there)."""
    found = getattr(module, "get_example_inputs", None)
    if found is None and hasattr(module, "Model"):
        found = getattr(module.Model, "get_example_inputs", None)
    return found


def job_inputs(torch: Any, job: dict[str, Any], device: str) -> list[Any]:
    """The spec variant's inputs if it lists them, else the original kernel's example inputs."""
    if job["variant"]["inputs"]:
        return make_inputs(torch, job["variant"], job["seed"], device)
    return example_inputs(torch, job, job["seed"], device)


def build_model(torch: Any, module: Any, variant: dict[str, Any], device: str) -> Any:
    """``Model(*inits)``; floating parameters cast to the variant dtype like users' harnesses do."""
    if not hasattr(module, "Model"):
        raise AttributeError("the kernel file defines no class Model")
    torch.manual_seed(MODEL_SEED)
    try:
        model = module.Model(*variant["init_args"])
    except TypeError as exc:
        if "positional argument" not in str(exc):
            raise
        given = list(variant["init_args"])
        raise TypeError(
            f"{exc} -- Model was given {given or 'no arguments'} from the spec's 'inits:'; list one entry per "
            "__init__ argument, in order, e.g. 'inits: [{dim: IN}, {dim: OUT}]' with IN/OUT in the variant's dims"
        ) from exc
    if isinstance(model, torch.nn.Module):
        model = model.to(device)
        if variant.get("dtype") and torch_dtype(torch, variant["dtype"]).is_floating_point:
            model = model.to(torch_dtype(torch, variant["dtype"]))
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
