"""The job executor for compiled C++ source kernels (CUDA, SYCL, ...).

Same protocol as every DSL (one oracle per run, fresh seeded inputs per check, poisoned outputs,
worker process with a timeout: :class:`kernelpilot.execution.JobExecutor`); what C++ sources share
on top of it lives here:

* the oracle must be the PyTorch reference ``<kernel>_pytorch.py`` beside the kernel: a C++ file has
  no ``Model`` the worker could fall back to;
* compiler settings travel in the job (``job_build_fields``) and builds land in a cache in the
  executor's work folder, so a source built once is only loaded afterwards;
* :meth:`CompiledSourceExecutor.prebuild` compiles a batch of candidates in parallel worker processes
  (``build_only`` jobs) into that cache, so the pipeline's one-by-one checks only load finished builds.

A DSL plugin subclasses it with its suffixes, devices, worker, compiler options and ``validate``.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kernelpilot.errors import InputError
from kernelpilot.execution.job_executor import JobExecutor, reference_path
from kernelpilot.pipeline.contracts import Evaluation
from kernelpilot.spec import KernelSpec, load_spec


def source_digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def pytorch_reference(kernel_path: Path) -> Path | None:
    """``gemm.cu`` -> ``gemm_pytorch.py`` (the same convention as for Python kernels)."""
    return reference_path(kernel_path.with_suffix(".py"))


class CompiledSourceExecutor(JobExecutor):
    """:class:`~kernelpilot.pipeline.contracts.Executor` for C++ source kernels built by a compiler."""

    suffixes: tuple[str, ...] = ()  # kernel files this executor accepts (".cu", ".cpp", ...)
    allowed_devices: tuple[str, ...] = ("cuda", "cpu")  # the first is the real one; cpu: compile only
    dsl_name = ""
    builds_ahead = True  # the worker understands ``build_only`` jobs (parallel prebuild)

    def __init__(
        self,
        device: str,
        settings: Any = None,
        *,
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
        super().__init__(self.dsl_name, device, settings, **kwargs)
        self.defines = dict(defines or {})
        self.extra_flags = list(extra_flags or [])
        self.compile_timeout_s = compile_timeout_s
        self.parallel_builds = parallel_builds
        self._built_ok: set[str] = set()  # sha256 of sources whose full build succeeded

    def accepted_suffixes(self) -> tuple[str, ...]:
        """Every kernel-file suffix :meth:`prepare` accepts (for its error message)."""
        return self.suffixes

    def select_form(self, kernel_path: Path) -> None:
        """Check that the kernel file is one this executor builds; a DSL with a second form (CUDA's
        ``load_inline`` Python file) switches worker and candidate suffix here."""
        if kernel_path.suffix not in self.suffixes:
            raise InputError(
                f"a {self.dsl_name} source kernel is a {' or '.join(self.accepted_suffixes())} file",
                file=str(kernel_path),
                field="--input",
            )

    def prepare(self, kernel_path: Path, spec: Any, variant: str | None) -> None:
        self.kernel_path = Path(kernel_path).resolve()
        if not self.kernel_path.is_file():
            raise InputError("kernel file not found", file=str(kernel_path))
        self.select_form(self.kernel_path)
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

    def job_build_fields(self) -> dict[str, Any]:
        """Compiler settings the worker needs (the build cache lives in this executor's work folder)."""
        return {
            "defines": self.defines,
            "extra_flags": self.extra_flags,
            "timeout_s": self.compile_timeout_s,
            "cache_dir": str(self._workdir / "builds"),
        }

    def can_prebuild(self) -> bool:
        """Whether a parallel prebuild helps now (a DSL may need a device for its builds)."""
        return self.builds_ahead

    def prebuild(self, sources: list[str]) -> dict[str, str]:
        """Compile ``sources`` in parallel worker processes (``build_only`` jobs) into the build cache
        the evaluations use; returns ``{sha256: verdict}``.  Only a speed-up: every verdict is decided
        again by :meth:`evaluate`, which then loads the finished build.  No-op for a single source and
        where :meth:`can_prebuild` says no."""
        if self.variant is None or len(sources) < 2 or not self.can_prebuild():
            return {}
        workers = self.parallel_builds or int(os.environ.get("KP_PARALLEL_BUILDS", "0") or 0)
        workers = workers or max(1, min(8, (os.cpu_count() or 2) // 2))
        todo = [s for s in dict.fromkeys(sources) if source_digest(s) not in self._built_ok]
        if workers < 2 or len(todo) < 2:
            return {}

        def one(code: str) -> str:
            data = self._run_worker({"mode": "build_only", "seed": 0, "time_it": False}, [code])
            return str(data.get("verdict"))

        with ThreadPoolExecutor(max_workers=min(workers, len(todo))) as pool:
            verdicts = dict(zip([source_digest(s) for s in todo], pool.map(one, todo), strict=True))
        self._built_ok.update(d for d, v in verdicts.items() if v == "built")
        return verdicts

    def already_built(self, source: str) -> bool:
        """The compiler has accepted this exact source before (a full build succeeded)."""
        return source_digest(source) in self._built_ok

    def evaluate(self, source: str, *, seed: int, time_it: bool = True) -> Evaluation:
        """Compile (in the worker), check against the oracle on inputs from ``seed``, time if correct."""
        if self.variant is None or self.kernel_path is None:
            raise RuntimeError("call prepare() before evaluate()")
        data = self._run_worker({"seed": int(seed), "time_it": bool(time_it)}, [source])
        if "verdict" in data and "entries" not in data:
            if data["verdict"] in ("correct", "incorrect") or (data.get("extra") or {}).get("compiled"):
                self._built_ok.add(source_digest(source))
            return self._to_evaluation(data)
        return Evaluation(verdict="runtime_error", message="unexpected worker reply")

    def _job_extra_fields(self) -> dict[str, Any]:
        return {"build": self.job_build_fields()}

    def _per_source_timeout_s(self) -> float:
        return self.timeout_s + self.compile_timeout_s
