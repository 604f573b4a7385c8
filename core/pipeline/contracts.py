"""Contracts between the DSL-agnostic pipeline (core) and what DSL plugins supply through hooks.

The pipeline, stage loop, trial tree, engines and skills are the same code for every DSL; a DSL differs
only in the :class:`Executor` (``kp_executor``), its :class:`StageImpl` objects (``kp_stages``), prompt
folders and knowledge-base folders.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

# Fixed stage order (dependency order); ``--stages`` selects a subset, the order is kept.
STAGE_ORDER: tuple[str, ...] = (
    "algorithmic",
    "dtype_fix",
    "fusion",
    "memory_access",
    "block_pointers",
    "persistent_kernel",
    "device_specific",
    "autotuning",
    "discovery",
)

Verdict = Literal["correct", "incorrect", "compile_error", "runtime_error", "timeout", "invalid"]


@dataclass
class Timing:
    """Median/min/max milliseconds; ``interpreter`` marks CPU-interpreter timings (not comparable)."""

    median_ms: float
    min_ms: float
    max_ms: float
    repetitions: int
    interpreter: bool = False


@dataclass
class Evaluation:
    """What the executor says about one kernel source: correctness against the oracle and its time."""

    verdict: Verdict
    message: str = ""  # compiler / runtime error or mismatch summary, fed back to the stage loop
    timing: Timing | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        return self.verdict == "correct"


@runtime_checkable
class Executor(Protocol):
    """Compiles, runs, verifies and times kernel sources in a worker process (never in-process)."""

    dsl: str
    device: str  # "cuda" | "xpu" | "cpu"

    def prepare(self, kernel_path: Path, spec: Any, variant: str) -> None:
        """Load the spec variant, choose the oracle (``<kernel>_pytorch.py`` if present)."""
        ...

    def evaluate(self, source: str, *, seed: int, time_it: bool = True) -> Evaluation:
        """Check ``source`` against the oracle on fresh random inputs (``seed``), then time it."""
        ...

    def validate(self, source: str) -> list[str]:
        """Static checks without running (syntax for the DSL's language); returns problems found."""
        ...


@dataclass
class StageContext:
    """What a stage implementation sees when it proposes candidates."""

    stage: str
    dsl: str
    device: str
    original_source: str
    current_source: str  # the stage's input (best so far)
    issues: list[dict[str, Any]]
    spec: Any
    variant: str
    settings: Any
    feedback: list[str] = field(default_factory=list)  # messages from rejected earlier attempts
    knowledge: list[str] = field(default_factory=list)
    llm: Any = None  # an LLM client when the engine is "llm"
    attempt: int = 0


@runtime_checkable
class StageImpl(Protocol):
    """One optimization stage for one DSL and engine."""

    dsl: str
    stage: str
    engine: Literal["rules", "llm"]

    def propose(self, context: StageContext) -> list[str]:
        """Return candidate sources (possibly none) for this attempt."""
        ...
