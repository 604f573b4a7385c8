"""Executor for SYCL source kernels (C++ files obeying ``kernelpilot_sycl.hpp``), gated on icpx.

The job protocol, the PyTorch-reference oracle and the build cache in the job are the core's
(:class:`kernelpilot.cpp_source.executor.CompiledSourceExecutor`); the worker builds a runner program
with icpx and exchanges tensors through files.  Without icpx, ``prepare`` and ``validate`` raise
:class:`~kernelpilot.errors.ToolMissingError` naming what to install, so a run stops with one clear
message instead of failing every candidate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.cpp_source.executor import CompiledSourceExecutor

SYCL_SUFFIXES = (".cpp", ".cc", ".cxx", ".sycl")


def claims_file(path: Path, source: str) -> bool:
    """A C++ file with ``kp_forward`` that mentions ``sycl``."""
    return Path(path).suffix in SYCL_SUFFIXES and "kp_forward" in source and "sycl" in source


class SyclSourceExecutor(CompiledSourceExecutor):
    """:class:`~kernelpilot.pipeline.contracts.Executor` for SYCL C++ kernels built with icpx."""

    worker_module = "kernelpilot.dsl_plugins.sycl.source_worker"
    suffix = ".cpp"
    suffixes: tuple[str, ...] = SYCL_SUFFIXES
    allowed_devices: tuple[str, ...] = ("xpu", "cpu")  # cpu: a SYCL CPU device if the runtime has one
    dsl_name = "sycl"
    builds_ahead = False  # the SYCL worker has no build_only mode

    def __init__(
        self,
        device: str = "xpu",
        settings: Any = None,
        *,
        icpx: str | None = None,
        aot_device: str | None = None,
        grf_mode: str | None = None,
        compile_timeout_s: float = 600.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(device, settings, compile_timeout_s=compile_timeout_s, **kwargs)
        self.icpx = icpx
        self.aot_device = aot_device
        self.grf_mode = grf_mode

    def build_options(self) -> Any:
        from kernelpilot.dsl_plugins.sycl.source_build import SyclBuildOptions

        return SyclBuildOptions(
            icpx=self.icpx,
            aot_device=self.aot_device,
            grf_mode=self.grf_mode,
            defines=self.defines,
            extra_flags=self.extra_flags,
            timeout_s=self.compile_timeout_s,
        )

    def prepare(self, kernel_path: Path, spec: Any, variant: str | None) -> None:
        from kernelpilot.dsl_plugins.sycl.source_build import find_icpx

        find_icpx(self.icpx)  # gate: ToolMissingError with install instructions
        super().prepare(kernel_path, spec, variant)

    def timing_noise(self) -> float | None:
        return 0.03  # wall-clock timing of whole calls: a little noisier than CUDA events

    def validate(self, source: str) -> list[str]:
        """``icpx -fsycl -fsyntax-only``; never a Python parser."""
        from kernelpilot.dsl_plugins.sycl.source_build import check_syntax

        problems = [] if "kp_forward" in source else ["no kp_forward entry point (see kernelpilot_sycl.hpp)"]
        return problems + check_syntax(source, self._workdir / "syntax", self.build_options())

    def job_build_fields(self) -> dict[str, Any]:
        return {
            "icpx": self.icpx,
            "aot_device": self.aot_device,
            "grf_mode": self.grf_mode,
            **super().job_build_fields(),
        }
