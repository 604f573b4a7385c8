"""Executor for CUDA source kernels (``.cu`` files obeying ``kernelpilot_cuda.hpp``).

Same protocol as the Triton executor (one oracle per run, fresh seeded inputs per check, poisoned
outputs, ``triton.testing.do_bench`` medians, worker process with a timeout) -- it reuses that class
for tolerances, job files, timeouts and result conversion and only swaps the worker module, the file
suffix and the static check: ``validate`` runs nvcc's front end, never a Python parser.

The oracle must be the PyTorch reference ``<kernel>_pytorch.py`` beside the ``.cu``: a C++ file has no
``Model`` the worker could fall back to.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.dsl_plugins.triton.executor import TritonExecutor, reference_path
from kernelpilot.errors import InputError
from kernelpilot.spec import KernelSpec, load_spec

CUDA_SUFFIXES = (".cu", ".cuh")


def pytorch_reference(kernel_path: Path) -> Path | None:
    """``gemm.cu`` -> ``gemm_pytorch.py`` (the same convention as for Python kernels)."""
    return reference_path(kernel_path.with_suffix(".py"))


class CudaSourceExecutor(TritonExecutor):
    """:class:`~kernelpilot.pipeline.contracts.Executor` for ``.cu`` kernels built with nvcc."""

    worker_module = "kernelpilot.dsl_plugins.cuda.source_worker"
    suffix = ".cu"  # of the candidate files handed to the worker
    suffixes: tuple[str, ...] = CUDA_SUFFIXES  # kernel files this executor accepts
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

    def prepare(self, kernel_path: Path, spec: Any, variant: str | None) -> None:
        self.kernel_path = Path(kernel_path).resolve()
        if not self.kernel_path.is_file():
            raise InputError("kernel file not found", file=str(kernel_path))
        if self.kernel_path.suffix not in self.suffixes:
            raise InputError(
                f"a {self.dsl_name} source kernel is a {' or '.join(self.suffixes)} file",
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
        return Path(path).suffix in self.suffixes and "kp_forward" in source

    def timing_noise(self) -> float | None:
        return 0.02 if self.device == "cuda" else None

    def build_options(self) -> Any:
        from kernelpilot.dsl_plugins.cuda.source_build import DEFAULT_ARCH, BuildOptions

        return BuildOptions(
            arch=self.arch or DEFAULT_ARCH,
            nvcc=self.nvcc,
            defines=self.defines,
            extra_flags=self.extra_flags,
            include_dirs=[self.kernel_path.parent] if self.kernel_path else [],
            timeout_s=self.compile_timeout_s,
        )

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
        """nvcc front end (device and host syntax/type checks), no code generation."""
        from kernelpilot.dsl_plugins.cuda.source_build import check_syntax

        problems = []
        if "kp_forward" not in source:
            problems.append("no kp_forward entry point (see kernelpilot_cuda.hpp)")
        return problems + check_syntax(source, self._workdir / "syntax", self.build_options())

    def evaluate(self, source: str, *, seed: int, time_it: bool = True) -> Any:
        """Compile (in the worker), check against the oracle on inputs from ``seed``, time if correct."""
        from kernelpilot.pipeline.contracts import Evaluation

        if self.variant is None or self.kernel_path is None:
            raise RuntimeError("call prepare() before evaluate()")
        data = self._run_worker({"seed": int(seed), "time_it": bool(time_it)}, [source])
        if "verdict" in data and "entries" not in data:
            return self._to_evaluation(data)
        return Evaluation(verdict="runtime_error", message="unexpected worker reply")

    def _job_extra_fields(self) -> dict[str, Any]:
        return {"build": self.job_build_fields()}

    def _per_source_timeout_s(self) -> float:
        return self.timeout_s + self.compile_timeout_s


__all__ = ["CudaSourceExecutor", "pytorch_reference"]
