"""Triton executor: the core's subprocess job executor with the Triton worker and Triton's checks.

Everything about jobs, the worker process, timeouts, the oracle and result conversion is
:class:`kernelpilot.execution.JobExecutor`; this class names the worker
(:mod:`kernelpilot.dsl_plugins.triton.worker`), says which files are Triton's and checks a source
statically before it is run; :func:`claims_file` is the DSL detection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.execution import JobExecutor
from kernelpilot.python_source.load_inline import uses_load_inline
from kernelpilot.python_source.validate import validate_model_source

JIT_DECORATORS = frozenset({"triton.jit", "jit"})


def claims_file(path: Path, source: str) -> bool:
    """DSL detection: Gluon files import ``triton.experimental.gluon``; Triton files do not.  A file
    that builds its kernel with ``load_inline(cuda_sources=...)`` and defines no ``@triton.jit``
    kernel is not Triton's (it may still ``import triton``, e.g. for ``triton.testing``)."""
    is_gluon = "triton.experimental.gluon" in source or "@gluon.jit" in source
    if uses_load_inline(source) and "@triton.jit" not in source:
        return False
    return not is_gluon and ("@triton.jit" in source or "import triton" in source)


class TritonExecutor(JobExecutor):
    """:class:`~kernelpilot.pipeline.contracts.Executor` for Triton kernel files."""

    worker_module = "kernelpilot.dsl_plugins.triton.worker"
    verifies_outputs = True  # its worker is worker_kit.model_worker

    def __init__(
        self, dsl: str = "triton", device: str = "cuda", settings: Any = None, **kwargs: Any
    ) -> None:
        super().__init__(dsl, device, settings, **kwargs)

    def validate(self, source: str) -> list[str]:
        return validate_model_source(source, decorators=JIT_DECORATORS, kernel_label="@triton.jit")
