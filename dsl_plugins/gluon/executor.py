"""Gluon executor: the core's subprocess job executor with the Gluon worker and Gluon's checks.

The one behavioural difference from Triton: Gluon kernels have no interpreter mode
(``TRITON_INTERPRET=1`` fails with "0 active drivers"), so on ``cpu`` an evaluation says so plainly
instead of reporting a confusing runtime error for every candidate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.execution import JobExecutor
from kernelpilot.pipeline.contracts import Evaluation
from kernelpilot.python_source.validate import validate_model_source

JIT_DECORATORS = frozenset({"gluon.jit", "triton.experimental.gluon.jit"})
NO_INTERPRETER = "Gluon kernels cannot run under the Triton interpreter (TRITON_INTERPRET); use --device cuda"


def claims_file(path: Path, source: str) -> bool:
    """Gluon files import ``triton.experimental.gluon`` or decorate kernels with ``@gluon.jit``."""
    return "triton.experimental.gluon" in source or "@gluon.jit" in source


class GluonExecutor(JobExecutor):
    """:class:`~kernelpilot.pipeline.contracts.Executor` for Gluon kernel files."""

    worker_module = "kernelpilot.dsl_plugins.gluon.worker"
    verifies_outputs = True  # its worker is worker_kit.model_worker

    def __init__(self, device: str = "cuda", settings: Any = None, **kwargs: Any) -> None:
        super().__init__("gluon", device, settings, **kwargs)

    def validate(self, source: str) -> list[str]:
        return validate_model_source(source, decorators=JIT_DECORATORS, kernel_label="@gluon.jit")

    def runnable_on(self, device: str) -> str | None:
        """The pipeline asks before the baseline; Gluon has no interpreter mode."""
        return NO_INTERPRETER if device == "cpu" else None

    def evaluate(self, source: str, *, seed: int, time_it: bool = True) -> Evaluation:
        if self.device == "cpu":
            return Evaluation(verdict="runtime_error", message=NO_INTERPRETER)
        return super().evaluate(source, seed=seed, time_it=time_it)

    def evaluate_side_by_side(self, sources: list[str], *, seed: int, rounds: int = 3) -> list[Evaluation]:
        if self.device == "cpu":
            return [self.evaluate(s, seed=seed) for s in sources]
        return super().evaluate_side_by_side(sources, seed=seed, rounds=rounds)
