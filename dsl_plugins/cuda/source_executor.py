"""Executor for CUDA source kernels: ``.cu`` files obeying ``kernelpilot_cuda.hpp``, and Python files
whose ``Model`` builds its extension with ``torch.utils.cpp_extension.load_inline`` (the *inline* form,
:mod:`.inline_source` / :mod:`.inline_worker`).

The job protocol, the PyTorch-reference oracle, the build cache in the job and the parallel prebuild
are the core's (:class:`kernelpilot.cpp_source.executor.CompiledSourceExecutor`); this class adds
nvcc's options, the inline form (its own worker and candidate suffix) and the static check:
``validate`` runs nvcc's front end, never a Python parser on CUDA.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.cpp_source.executor import CompiledSourceExecutor, pytorch_reference
from kernelpilot.errors import InputError
from kernelpilot.python_source.load_inline import uses_load_inline

CUDA_SUFFIXES = (".cu", ".cuh")
INLINE_SUFFIX = ".py"  # the load_inline form
ABI_WORKER = "kernelpilot.dsl_plugins.cuda.source_worker"
INLINE_WORKER = "kernelpilot.dsl_plugins.cuda.inline_worker"


def claims_file(path: Path, source: str) -> bool:
    """A ``.cu`` file with ``kp_forward``, or a ``.py`` file building its kernel with ``load_inline``
    (``cuda_sources=``) that defines no ``@triton.jit`` kernel."""
    suffix = Path(path).suffix
    if suffix == INLINE_SUFFIX:
        return uses_load_inline(source) and "@triton.jit" not in source
    return suffix in CUDA_SUFFIXES and "kp_forward" in source


class CudaSourceExecutor(CompiledSourceExecutor):
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
        compile_timeout_s: float = 300.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(device, settings, compile_timeout_s=compile_timeout_s, **kwargs)
        self.arch = arch
        self.nvcc = nvcc
        self.inline = False  # set by prepare(): the kernel is the load_inline form

    def accepted_suffixes(self) -> tuple[str, ...]:
        return (*self.suffixes, *self.inline_suffixes)

    def select_form(self, kernel_path: Path) -> None:
        self.inline = kernel_path.suffix in self.inline_suffixes
        if not self.inline:
            super().select_form(kernel_path)
            return
        if not uses_load_inline(kernel_path.read_text(encoding="utf-8")):
            raise InputError(
                f"a {self.dsl_name} kernel in a .py file builds its extension with "
                "torch.utils.cpp_extension.load_inline(..., cuda_sources=...); this file does not "
                f"(or write a {' / '.join(self.suffixes)} file with kp_forward)",
                file=str(kernel_path),
                field="--input",
            )
        self.worker_module, self.suffix = INLINE_WORKER, INLINE_SUFFIX
        self.verifies_outputs = True  # the load_inline worker is worker_kit.model_worker

    def timing_noise(self) -> float | None:
        return 0.02 if self.device == "cuda" else None

    def can_prebuild(self) -> bool:
        """The inline form builds through a CUDA torch, so only on the GPU."""
        return not (self.inline and self.device != "cuda")

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
        return {"arch": self.arch, "nvcc": self.nvcc, **super().job_build_fields()}

    def validate(self, source: str) -> list[str]:
        """nvcc front end (device and host syntax/type checks), no code generation.  Skipped for a
        source whose full build already succeeded (prebuild): the compiler has accepted it."""
        from kernelpilot.dsl_plugins.cuda.source_build import check_syntax

        if self.inline:
            return self._validate_inline(source)
        problems = []
        if "kp_forward" not in source:
            problems.append("no kp_forward entry point (see kernelpilot_cuda.hpp)")
        if self.already_built(source):
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
        if self.already_built(source):
            return []
        options = self.build_options()
        problems = []
        for seg in segments:
            problems += check_syntax(syntax_unit(seg, name), self._workdir / "syntax", options)
        return problems

    def _job_extra_fields(self) -> dict[str, Any]:
        fields = super()._job_extra_fields()
        if self.inline:  # MAX_JOBS: ninja jobs per extension build (parallel prebuilds share the cores)
            fields["build"]["max_jobs"] = 2
        return fields


__all__ = ["INLINE_WORKER", "CudaSourceExecutor", "claims_file", "pytorch_reference"]
