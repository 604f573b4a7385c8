"""Worker process for the ``load_inline`` form of CUDA kernels (a Python ``Model`` + CUDA in a string).

Run as ``python -m kernelpilot.dsl_plugins.cuda.inline_worker JOB.json``.  Before the candidate is
imported, ``torch.utils.cpp_extension.load_inline`` is wrapped (:func:`install_build_hook`):

* every build goes to ``<cache>/<name>_<sha>/`` and the extension is renamed ``<name>_<sha>``, where
  the hash covers the sources, flags, functions, arch list and torch version -- a re-evaluation (or the
  side-by-side and final checks) imports the finished build instead of compiling again, and several
  candidates can be loaded in one process without clashing module names;
* ``verbose=False``; a failed build raises :class:`CompilationError` whose text is the compiler's
  output with the build folder's path removed -- the verdict is ``compile_error`` and that text is the
  feedback the next attempt sees.

Everything after the import is the core's protocol for a ``Model`` (:mod:`kernelpilot.worker_kit.model_worker`:
seeded inputs, oracle, poisoned allocations, ``compare``, ``do_bench`` timing, interleaved side-by-side rounds); this module
only adds the build step, the build records in ``extra.builds`` and the ``build_only`` mode the
executor's parallel :meth:`prebuild` uses.  On ``--device cpu`` (a CPU build of torch) the CUDA
segments are compiled to an object with nvcc and the same flags instead, and the verdict says the
kernel was not run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from kernelpilot.worker_kit import model_worker
from kernelpilot.worker_kit.model import build_model, load_module
from kernelpilot.worker_kit.serve import error_text, exit_without_teardown, serve_job

BUILDS: list[dict[str, Any]] = []  # one record per load_inline call in this process


class CompilationError(RuntimeError):
    """A candidate's extension did not build (classified ``compile_error`` by the worker kit)."""


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def clean_build_log(text: str, build_dir: str) -> str:
    """The compiler's messages: the build folder's path dropped, command echoes shortened."""
    text = text.replace(build_dir + os.sep, "").replace(build_dir, ".")
    lines = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if len(line) > 400 and re.search(r"(nvcc|c\+\+|g\+\+)\s", line):
            line = line[:200] + " ... (command shortened)"
        lines.append(line)
    out = "\n".join(lines)
    return out if len(out) <= 6000 else "... (truncated)\n" + out[-6000:]


def arch_list(job: dict[str, Any]) -> str:
    """TORCH_CUDA_ARCH_LIST for the builds: the job's arch (``sm_90a`` -> ``9.0a``), else the GPU's."""
    arch = (job.get("build") or {}).get("arch")
    if arch:
        match = re.match(r"^sm_(\d+)(\d)([af]?)$", str(arch))
        if match:
            return f"{match.group(1)}.{match.group(2)}{match.group(3)}"
    if job["device"] == "cuda":
        import torch

        major, minor = torch.cuda.get_device_capability()
        return f"{major}.{minor}"
    return "9.0"


def install_build_hook(torch: Any, cache_dir: Path) -> None:
    """Wrap ``load_inline`` (see the module docstring).  The calling file's text gives each CUDA
    string's line for a ``#line`` directive, so compiler messages cite the kernel file's lines."""
    import torch.utils.cpp_extension as cpp_extension

    original = getattr(cpp_extension.load_inline, "__wrapped__", cpp_extension.load_inline)
    shown = "kernel.py"
    texts: dict[str, str] = {}

    def with_line(src: str, caller: str) -> str:
        if caller not in texts:
            try:
                texts[caller] = Path(caller).read_text(encoding="utf-8")
            except OSError:
                texts[caller] = ""
        file_text = texts[caller]
        at = file_text.find(src) if src else -1
        if at < 0 or file_text.find(src, at + 1) >= 0:
            return src
        return f'#line {file_text.count(chr(10), 0, at) + 1} "{shown}"\n{src}'

    def load_inline(name: str, cpp_sources: Any, cuda_sources: Any = None, *args: Any, **kwargs: Any) -> Any:
        cpp = _as_list(cpp_sources)
        caller = sys._getframe(1).f_code.co_filename
        cuda = [with_line(s, caller) for s in _as_list(cuda_sources)]
        kwargs.pop("verbose", None)
        kwargs.pop("build_directory", None)
        key = {
            "name": name,
            "cpp": cpp,
            "cuda": cuda,
            "args": [repr(a) for a in args],
            "kwargs": {k: repr(v) for k, v in sorted(kwargs.items())},
            "arch": os.environ.get("TORCH_CUDA_ARCH_LIST", ""),
            "torch": torch.__version__,
        }
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
        unique = f"{name}_{digest}"
        build_dir = cache_dir / unique
        build_dir.mkdir(parents=True, exist_ok=True)
        cached = any(build_dir.glob(f"{unique}*.so"))
        start = time.perf_counter()
        try:
            module = original(
                unique, list(cpp), list(cuda), *args, build_directory=str(build_dir), verbose=False, **kwargs
            )
        except Exception as exc:  # noqa: BLE001 - a build failure is this candidate's verdict
            seconds = time.perf_counter() - start
            BUILDS.append({"name": name, "ok": False, "seconds": round(seconds, 2), "cached": False})
            raise CompilationError(clean_build_log(str(exc), str(build_dir))) from None
        BUILDS.append(
            {"name": name, "ok": True, "seconds": round(time.perf_counter() - start, 2), "cached": cached}
        )
        return module

    load_inline.__wrapped__ = original  # type: ignore[attr-defined]
    cpp_extension.load_inline = load_inline


def compile_only(job: dict[str, Any], path: str) -> dict[str, Any]:
    """Without a CUDA torch: nvcc -c of each CUDA segment exactly as load_inline writes it (object only,
    nothing links or runs).  Gives compile errors as verdicts on a machine without a GPU."""
    from kernelpilot.cpp_source.build import cached_build
    from kernelpilot.dsl_plugins.cuda.inline_source import (
        IMPLICIT_CUDA_HEADERS,
        TORCH_NVCC_FLAGS,
        cuda_segments,
        torch_build_info,
    )
    from kernelpilot.dsl_plugins.cuda.source_build import arch_flags, find_nvcc

    info = torch_build_info(sys.executable)
    build = job.get("build") or {}
    source = Path(path).read_text(encoding="utf-8")
    arch = build.get("arch") or "sm_90a"
    flags = [f"-std={info['std']}", *arch_flags(arch), *TORCH_NVCC_FLAGS]
    for folder in info["include_paths"]:  # type: ignore[union-attr]
        flags += ["-I", str(folder)]
    total = 0.0
    for seg in cuda_segments(source):
        text = f'{IMPLICIT_CUDA_HEADERS}#line {seg.line} "kernel.py"\n{seg.text}'
        result = cached_build(
            text,
            Path(build["cache_dir"]),
            lambda src, out: [
                find_nvcc(build.get("nvcc")),
                *flags,
                "-O3",
                "-Xcompiler",
                "-fPIC",
                "-c",
                str(src),
                "-o",
                str(out),
            ],
            source_suffix=".cu",
            output_suffix=".o",
            probe_output="kernel.o",
            tmp_suffix=".tmp.o",
            tool="nvcc",
            timeout_s=float(build.get("timeout_s", 600.0)),
        )
        total += result.seconds
        if not result.ok:
            return {
                "verdict": "compile_error",
                "message": result.log,
                "extra": {"nvcc": " ".join(result.command)},
            }
    return {
        "verdict": "runtime_error",
        "message": "compiled with nvcc (objects only), but a CUDA kernel runs only on device 'cuda' "
        f"(this run uses {job['device']!r})",
        "extra": {"compiled": True, "compile_s": round(total, 2)},
    }


def _prepare(job: dict[str, Any]) -> Any:
    import torch

    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", arch_list(job))
    if (job.get("build") or {}).get("max_jobs"):
        os.environ.setdefault("MAX_JOBS", str(job["build"]["max_jobs"]))
    install_build_hook(torch, Path(job["build"]["cache_dir"]))
    return torch


def _with_builds(result: dict[str, Any]) -> dict[str, Any]:
    extra = result.setdefault("extra", {})
    extra["builds"] = list(BUILDS)
    extra["compile_s"] = round(sum(b["seconds"] for b in BUILDS if not b["cached"]), 2)
    return result


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    if job["device"] != "cuda":
        return compile_only(job, job["candidate_paths"][0])
    torch = _prepare(job)
    if job.get("mode") == "build_only":
        return build_only(torch, job)
    return _with_builds(model_worker.run_job(job))


def build_only(torch: Any, job: dict[str, Any]) -> dict[str, Any]:
    """Import the candidate (module-level load_inline builds) and construct its Model (a load_inline in
    ``__init__`` builds); nothing runs.  The build lands in the shared cache for the real evaluation."""
    sys.path.insert(0, job["kernel_dir"])
    try:
        module = load_module(job["candidate_paths"][0], "kp_candidate")
        if not BUILDS:
            build_model(torch, module, job["variant"], job["device"])
    except CompilationError as exc:
        return _with_builds({"verdict": "compile_error", "message": str(exc)})
    except BaseException as exc:  # noqa: BLE001
        return _with_builds({"verdict": "runtime_error", "message": error_text(exc)})
    return _with_builds({"verdict": "built", "message": f"{len(BUILDS)} extension(s) built or reused"})


def run_side_by_side(job: dict[str, Any]) -> dict[str, Any]:
    if job["device"] != "cuda":
        return {
            "entries": [compile_only(job, p) for p in job["candidate_paths"]],
            "device_name": job["device"],
        }
    _prepare(job)
    return model_worker.run_side_by_side(job)


def main(argv: list[str] | None = None) -> int:
    return serve_job(sys.argv[1:] if argv is None else argv, run_job, run_side_by_side)


if __name__ == "__main__":
    exit_without_teardown(main())
