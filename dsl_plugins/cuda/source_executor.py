"""Executor for CUDA source kernels: ``.cu`` files obeying ``kernelpilot_cuda.hpp``, and Python files
whose ``Model`` builds its extension with ``torch.utils.cpp_extension.load_inline`` (the *inline* form,
:mod:`.inline_source` / :mod:`.inline_worker`).

Same protocol as the Triton executor (one oracle per run, fresh seeded inputs per check, poisoned
outputs, ``triton.testing.do_bench`` medians, worker process with a timeout) -- it reuses that class
for tolerances, job files, timeouts and result conversion and only swaps the worker module, the file
suffix and the static check: ``validate`` runs nvcc's front end, never a Python parser.

The oracle must be the PyTorch reference ``<kernel>_pytorch.py`` beside the kernel: a C++ file has no
``Model`` the worker could fall back to, and the inline form's ``Model`` is the CUDA code under test.

:meth:`CudaSourceExecutor.prebuild` compiles a batch of candidates in parallel worker processes into the
same build cache the evaluations use, so the pipeline's one-by-one checks only load finished builds.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kernelpilot.dsl_plugins.triton.executor import TritonExecutor, reference_path
from kernelpilot.errors import InputError
from kernelpilot.spec import KernelSpec, load_spec

CUDA_SUFFIXES = (".cu", ".cuh")
INLINE_SUFFIX = ".py"  # the load_inline form
ABI_WORKER = "kernelpilot.dsl_plugins.cuda.source_worker"
INLINE_WORKER = "kernelpilot.dsl_plugins.cuda.inline_worker"


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def pytorch_reference(kernel_path: Path) -> Path | None:
    """``gemm.cu`` -> ``gemm_pytorch.py`` (the same convention as for Python kernels)."""
    return reference_path(kernel_path.with_suffix(".py"))


class CudaSourceExecutor(TritonExecutor):
    """:class:`~kernelpilot.pipeline.contracts.Executor` for ``.cu`` kernels built with nvcc."""

    worker_module = ABI_WORKER  # prepare() switches to INLINE_WORKER for a .py kernel
    suffix = ".cu"  # of the candidate files handed to the worker (".py" for the inline form)
    suffixes: tuple[str, ...] = CUDA_SUFFIXES  # C ABI kernel files this executor accepts
    inline_suffixes: tuple[str, ...] = (INLINE_SUFFIX,)  # load_inline kernel files
    allowed_devices: tuple[str, ...] = ("cuda", "cpu")  # cpu: compile and validate only
    dsl_name = "cuda"

    def __init__(
        self,
        device: str = "cuda",
        settings: Any = None,
        *,
        arch: str | None = None,
        nvcc: str | None = None,
        defines: dict[str, str] | None = None,
        extra_flags: list[str] | None = None,
        compile_timeout_s: float = 300.0,
        parallel_builds: int | None = None,
        **kwargs: Any,
    ) -> None:
        if device not in self.allowed_devices:
            raise InputError(
                f"{self.dsl_name} source kernels run on device {self.allowed_devices[0]!r} "
                f"(or 'cpu' to compile and validate only); got {device!r}",
                field="device",
            )
        super().__init__(dsl=self.dsl_name, device=device, settings=settings, **kwargs)
        self.arch = arch
        self.nvcc = nvcc
        self.defines = dict(defines or {})
        self.extra_flags = list(extra_flags or [])
        self.compile_timeout_s = compile_timeout_s
        self.parallel_builds = parallel_builds
        self.inline = False  # set by prepare(): the kernel is the load_inline form
        self._built_ok: set[str] = set()  # sha256 of sources whose full build succeeded

    def prepare(self, kernel_path: Path, spec: Any, variant: str | None) -> None:
        self.kernel_path = Path(kernel_path).resolve()
        if not self.kernel_path.is_file():
            raise InputError("kernel file not found", file=str(kernel_path))
        self.inline = self.kernel_path.suffix in self.inline_suffixes
        if self.inline:
            from kernelpilot.dsl_plugins.cuda.inline_source import uses_load_inline

            if not uses_load_inline(self.kernel_path.read_text(encoding="utf-8")):
                raise InputError(
                    f"a {self.dsl_name} kernel in a .py file builds its extension with "
                    "torch.utils.cpp_extension.load_inline(..., cuda_sources=...); this file does not "
                    f"(or write a {' / '.join(self.suffixes)} file with kp_forward)",
                    file=str(kernel_path),
                    field="--input",
                )
            self.worker_module, self.suffix = INLINE_WORKER, INLINE_SUFFIX
        elif self.kernel_path.suffix not in self.suffixes:
            allowed = (*self.suffixes, *self.inline_suffixes)
            raise InputError(
                f"a {self.dsl_name} source kernel is a {' or '.join(allowed)} file",
                file=str(kernel_path),
                field="--input",
            )
        self.spec = spec if isinstance(spec, KernelSpec) else load_spec(spec)
        self.variant = self.spec.resolve(variant)
        ref = pytorch_reference(self.kernel_path)
        if ref is None:
            raise InputError(
                f"a {self.dsl_name} source kernel needs its PyTorch reference {self.kernel_path.stem}_pytorch.py beside it "
                "(the oracle: a Model with the same init args whose forward returns the expected outputs)",
                file=str(kernel_path),
            )
        self.oracle_path, self.oracle_kind = ref, f"pytorch reference {ref.name}"

    def claims(self, path: Path, source: str) -> bool:
        suffix = Path(path).suffix
        if suffix in self.inline_suffixes and self.dsl_name == "cuda":
            from kernelpilot.dsl_plugins.cuda.inline_source import uses_load_inline

            return uses_load_inline(source) and "@triton.jit" not in source
        return suffix in self.suffixes and "kp_forward" in source

    def timing_noise(self) -> float | None:
        return 0.02 if self.device == "cuda" else None

    def build_options(self) -> Any:
        from kernelpilot.dsl_plugins.cuda.source_build import DEFAULT_ARCH, BuildOptions

        options = BuildOptions(
            arch=self.arch or DEFAULT_ARCH,
            nvcc=self.nvcc,
            defines=self.defines,
            extra_flags=self.extra_flags,
            include_dirs=[self.kernel_path.parent] if self.kernel_path else [],
            timeout_s=self.compile_timeout_s,
        )
        if self.inline:  # the torch headers, standard and nvcc flags load_inline builds with
            from kernelpilot.dsl_plugins.cuda.inline_source import TORCH_NVCC_FLAGS, torch_build_info

            info = torch_build_info(self.python)
            options.include_dirs += [Path(p) for p in info["include_paths"]]  # type: ignore[union-attr]
            options.std = str(info["std"])
            options.front_flags = list(TORCH_NVCC_FLAGS)
        return options

    def job_build_fields(self) -> dict[str, Any]:
        """Compiler settings the worker needs (the build cache lives in this executor's work folder)."""
        return {
            "arch": self.arch,
            "nvcc": self.nvcc,
            "defines": self.defines,
            "extra_flags": self.extra_flags,
            "timeout_s": self.compile_timeout_s,
            "cache_dir": str(self._workdir / "builds"),
        }

    def validate(self, source: str) -> list[str]:
        """nvcc front end (device and host syntax/type checks), no code generation.  Skipped for a
        source whose full build already succeeded (prebuild): the compiler has accepted it."""
        from kernelpilot.dsl_plugins.cuda.source_build import check_syntax

        if self.inline:
            return self._validate_inline(source)
        problems = []
        if "kp_forward" not in source:
            problems.append("no kp_forward entry point (see kernelpilot_cuda.hpp)")
        if _digest(source) in self._built_ok:
            return problems
        return problems + check_syntax(source, self._workdir / "syntax", self.build_options())

    def _validate_inline(self, source: str) -> list[str]:
        """Python's parser for the wrapper; nvcc's front end (with torch's headers, as load_inline
        compiles it) for each CUDA string.  The CUDA is never parsed as Python."""
        from kernelpilot.dsl_plugins.cuda.inline_source import cuda_segments, syntax_unit
        from kernelpilot.dsl_plugins.cuda.source_build import check_syntax

        name = self.kernel_path.name if self.kernel_path else "kernel.py"
        try:
            compile(source, name, "exec", dont_inherit=True)
            segments = cuda_segments(source)
        except SyntaxError as exc:
            return [f"syntax error in the Python wrapper {name}:{exc.lineno}: {exc.msg}"]
        if not segments:
            return [
                "no CUDA source found: load_inline(cuda_sources=...) must receive a string literal, a "
                "module-level name bound to one, or a list of those"
            ]
        if _digest(source) in self._built_ok:
            return []
        options = self.build_options()
        problems = []
        for seg in segments:
            problems += check_syntax(syntax_unit(seg, name), self._workdir / "syntax", options)
        return problems

    def prebuild(self, sources: list[str]) -> dict[str, str]:
        """Compile ``sources`` in parallel worker processes (``build_only`` jobs) into the build cache
        the evaluations use; returns ``{sha256: verdict}``.  Only a speed-up: every verdict is decided
        again by :meth:`evaluate`, which then loads the finished build.  No-op off the GPU for the
        inline form (builds need a CUDA torch) and for a single source."""
        if self.variant is None or len(sources) < 2 or (self.inline and self.device != "cuda"):
            return {}
        if self.worker_module not in (ABI_WORKER, INLINE_WORKER):  # a subclass's worker: no build_only
            return {}
        workers = self.parallel_builds or int(os.environ.get("KP_PARALLEL_BUILDS", "0") or 0)
        workers = workers or max(1, min(8, (os.cpu_count() or 2) // 2))
        todo = [s for s in dict.fromkeys(sources) if _digest(s) not in self._built_ok]
        if workers < 2 or len(todo) < 2:
            return {}

        def one(code: str) -> str:
            data = self._run_worker({"mode": "build_only", "seed": 0, "time_it": False}, [code])
            return str(data.get("verdict"))

        with ThreadPoolExecutor(max_workers=min(workers, len(todo))) as pool:
            verdicts = dict(zip([_digest(s) for s in todo], pool.map(one, todo), strict=True))
        self._built_ok.update(d for d, v in verdicts.items() if v == "built")
        return verdicts

    def evaluate(self, source: str, *, seed: int, time_it: bool = True) -> Any:
        """Compile (in the worker), check against the oracle on inputs from ``seed``, time if correct."""
        from kernelpilot.pipeline.contracts import Evaluation

        if self.variant is None or self.kernel_path is None:
            raise RuntimeError("call prepare() before evaluate()")
        data = self._run_worker({"seed": int(seed), "time_it": bool(time_it)}, [source])
        if "verdict" in data and "entries" not in data:
            if data["verdict"] in ("correct", "incorrect") or (data.get("extra") or {}).get("compiled"):
                self._built_ok.add(_digest(source))
            return self._to_evaluation(data)
        return Evaluation(verdict="runtime_error", message="unexpected worker reply")

    def _job_extra_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"build": self.job_build_fields()}
        if self.inline:  # MAX_JOBS: ninja jobs per extension build (parallel prebuilds share the cores)
            fields["build"]["max_jobs"] = 2
        return fields

    def _per_source_timeout_s(self) -> float:
        return self.timeout_s + self.compile_timeout_s


__all__ = ["INLINE_WORKER", "CudaSourceExecutor", "pytorch_reference"]
