"""Test doubles for pipeline-logic tests (the end-to-end tests use the real Triton executor).

``ScriptedExecutor`` reads directives from comments in the candidate source, so each test states
exactly what the "kernel" does: ``# time=2.5`` (median ms), ``# wrong`` (fails the oracle check),
``# crash``, ``# fails-from-seed=N`` (incorrect when checked with seed >= N: a kernel that only
passes on some inputs), ``# noisy=a,b,c`` (successive medians for repeated timings).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kernelpilot.pipeline.contracts import Evaluation, ExecutorBase, Timing


class ScriptedExecutor(ExecutorBase):
    def __init__(self, dsl: str = "triton", device: str = "cuda", interpreter: bool = False) -> None:
        self.dsl = dsl
        self.device = device
        self.interpreter = interpreter
        self.calls: list[tuple[str, int]] = []
        self.prepared: tuple[Path, Any, str] | None = None
        self.closed = False
        self._noisy_index = 0

    def prepare(self, kernel_path: Path, spec: Any, variant: str) -> None:
        self.prepared = (kernel_path, spec, variant)

    def validate(self, source: str) -> list[str]:
        return ["syntax error: scripted"] if "# invalid" in source else []

    def timing_noise(self) -> float | None:
        return None

    def close(self) -> None:
        self.closed = True

    def evaluate(self, source: str, *, seed: int, time_it: bool = True) -> Evaluation:
        self.calls.append((source, seed))
        if "# crash" in source:
            return Evaluation(verdict="runtime_error", message="Segmentation fault (scripted)")
        if "# wrong" in source:
            return Evaluation(verdict="incorrect", message="max abs error 3.5 > atol (scripted)")
        match = re.search(r"# fails-from-seed=(\d+)", source)
        if match and seed >= int(match.group(1)):
            return Evaluation(verdict="incorrect", message=f"mismatch on seed {seed} (scripted)")
        noisy = re.search(r"# noisy=([\d.,]+)", source)
        if noisy:
            values = [float(v) for v in noisy.group(1).split(",")]
            ms = values[self._noisy_index % len(values)]
            self._noisy_index += 1
        else:
            ms = float(re.search(r"# time=([\d.]+)", source).group(1))
        return Evaluation(
            verdict="correct",
            timing=Timing(ms, ms * 0.98, ms * 1.02, 10, self.interpreter),
            max_abs_error=0.0,
        )


class ScriptedStage:
    """A stage whose ``propose`` returns scripted candidate lists, one list per attempt."""

    def __init__(
        self, stage: str, attempts: list[list[str]], engine: str = "rules", dsl: str = "triton"
    ) -> None:
        self.stage = stage
        self.engine = engine
        self.dsl = dsl
        self.attempts = attempts
        self.contexts: list[Any] = []

    def propose(self, context: Any) -> list[str]:
        self.contexts.append(context)
        index = len(self.contexts) - 1
        return self.attempts[index] if index < len(self.attempts) else []


class SideBySideExecutor(ScriptedExecutor):
    """Adds ``evaluate_side_by_side``: timings there come from ``# sbs=X`` (else ``# time=X``, else
    10 ms), so a test can make a kernel look faster in its own run than side by side (drift)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.side_by_side_calls: list[tuple[list[str], int]] = []

    def evaluate_side_by_side(self, sources: list[str], *, seed: int, rounds: int = 3) -> list[Evaluation]:
        self.side_by_side_calls.append((list(sources), seed))
        out = []
        for source in sources:
            ev = ScriptedExecutor.evaluate(self, source, seed=seed)
            self.calls.pop()
            if ev.correct:
                match = re.search(r"# sbs=([\d.]+)", source) or re.search(r"# time=([\d.]+)", source)
                ms = float(match.group(1)) if match else 10.0
                ev.timing = Timing(ms, ms, ms, rounds, self.interpreter)
            out.append(ev)
        return out
