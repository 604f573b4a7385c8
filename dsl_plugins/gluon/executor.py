"""Gluon shares the Triton executor (same worker, oracle, poisoning and timing).

The one difference: Gluon kernels have no interpreter mode (``TRITON_INTERPRET=1`` fails with "0
active drivers"), so on ``cpu`` an evaluation says so plainly instead of reporting a confusing
runtime error for every candidate.
"""

from __future__ import annotations

from typing import Any

from kernelpilot.dsl_plugins.triton.executor import TritonExecutor
from kernelpilot.pipeline.contracts import Evaluation


class GluonExecutor(TritonExecutor):
    def __init__(self, device: str = "cuda", settings: Any = None, **kwargs: Any) -> None:
        super().__init__("gluon", device, settings, **kwargs)

    def runnable_on(self, device: str) -> str | None:
        """The pipeline asks before the baseline; Gluon has no interpreter mode."""
        if device == "cpu":
            return (
                "Gluon kernels cannot run under the Triton interpreter (TRITON_INTERPRET); use --device cuda"
            )
        return None

    def evaluate(self, source: str, *, seed: int, time_it: bool = True) -> Evaluation:
        if self.device == "cpu":
            return Evaluation(
                verdict="runtime_error",
                message="Gluon kernels cannot run under the Triton interpreter (TRITON_INTERPRET); use --device cuda",
            )
        return super().evaluate(source, seed=seed, time_it=time_it)

    def evaluate_side_by_side(self, sources: list[str], *, seed: int, rounds: int = 3) -> list[Evaluation]:
        if self.device == "cpu":
            return [self.evaluate(s, seed=seed) for s in sources]
        return super().evaluate_side_by_side(sources, seed=seed, rounds=rounds)
