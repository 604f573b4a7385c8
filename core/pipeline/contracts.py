"""Contracts between the DSL-agnostic pipeline (core) and what DSL plugins supply through hooks.

The pipeline, stage loop, trial tree, engines and skills are the same code for every DSL; a DSL differs
only in the :class:`ExecutorBase` subclass (``kp_executor``), its :class:`StageImpl` objects
(``kp_stages``), its :class:`StaticAnalyzer` objects (``kp_analyzers``), prompt folders and
knowledge-base folders.
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


def timing_columns(timing: Timing | None) -> dict[str, Any]:
    """The trial store's timing arguments (``record_result``) for ``timing``; None when not timed."""
    return {
        "median_ms": timing.median_ms if timing else None,
        "min_ms": timing.min_ms if timing else None,
        "max_ms": timing.max_ms if timing else None,
        "interpreter": bool(timing and timing.interpreter),
    }


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


class ExecutorBase:
    """What the pipeline needs from a DSL's executor (``kp_executor`` returns a subclass).

    Compiles, runs, verifies and times kernel sources in a worker process (never in-process).  The three
    required methods raise until a subclass implements them; the optional capabilities have no-op
    defaults here, so the pipeline calls every method directly instead of probing for it.  The core's
    :class:`kernelpilot.execution.JobExecutor` implements all of it for worker-process DSLs.
    """

    dsl: str = ""
    device: str = "cuda"  # "cuda" | "xpu" | "cpu"
    oracle_kind: str = ""  # what the candidates are checked against, for reports ("pytorch reference k.py")

    def prepare(self, kernel_path: Path, spec: Any, variant: str | None) -> None:
        """Load the spec variant, choose the oracle (``<kernel>_pytorch.py`` if present)."""
        raise NotImplementedError

    def evaluate(self, source: str, *, seed: int, time_it: bool = True) -> Evaluation:
        """Check ``source`` against the oracle on fresh random inputs (``seed``), then time it."""
        raise NotImplementedError

    def validate(self, source: str) -> list[str]:
        """Static checks without running (syntax for the DSL's language); returns problems found."""
        raise NotImplementedError

    # -- optional capabilities (defaults: the capability is absent) ---------------------------------
    def timing_noise(self) -> float | None:
        """A relative noise floor the executor knows for its timer (None: unknown)."""
        return None

    def runnable_on(self, device: str) -> str | None:
        """None if kernels can run on ``device``, else the reason (the pipeline stops before the
        baseline with that text, e.g. Gluon on "cpu")."""
        return None

    def prebuild(self, sources: list[str]) -> dict[str, str]:
        """Compile a batch of candidates ahead of their one-by-one checks (e.g. in parallel worker
        processes); returns ``{sha256: verdict}``.  Only a speed-up: :meth:`evaluate` decides every
        verdict again.  Default: builds nothing."""
        return {}

    def evaluate_side_by_side(
        self, sources: list[str], *, seed: int, rounds: int = 3
    ) -> list[Evaluation] | None:
        """Check every source against the oracle on the same inputs and time them interleaved in one
        process; ``None`` when the executor cannot (the default).  When supported, the pipeline
        confirms each stage acceptance with [input, candidate] and does the final fresh check and
        measurement as [original, best-k ...] side by side."""
        return None

    def close(self) -> None:
        """Stop worker processes and remove temporary files; the pipeline calls it at the end of a run."""


Executor = ExecutorBase  # the name the pipeline's signatures use


@dataclass
class StageContext:
    """What a stage implementation sees when it proposes candidates."""

    stage: str
    dsl: str
    device: str
    original_source: str
    current_source: str  # the stage's input (best so far)
    issues: list[Any]  # Issue objects (the pipeline) or their dicts (skills, LLM replies)
    spec: Any
    variant: str
    settings: Any
    feedback: list[str] = field(default_factory=list)  # messages from rejected earlier attempts
    knowledge: list[str] = field(default_factory=list)
    llm: Any = None  # an LLM client when the engine is "llm"
    attempt: int = 0
    # Set by the pipeline; the defaults keep older constructors valid:
    baseline: Evaluation | None = None  # the original kernel's evaluation
    stage_input: Evaluation | None = None  # evaluation of ``current_source``
    prompt_dirs: list[Path] = field(default_factory=list)  # the DSL plugin's template folders
    reference_source: str = ""  # the PyTorch reference (``<kernel>_pytorch.py``) when there is one
    profile_summary: str = ""  # hardware counters of the stage input (``optimize --profile``)


@runtime_checkable
class StageImpl(Protocol):
    """One optimization stage for one DSL and engine."""

    dsl: str
    stage: str
    engine: Literal["rules", "llm"]

    def propose(self, context: StageContext) -> list[str]:
        """Return candidate sources (possibly none) for this attempt."""
        ...


# ---------------------------------------------------------------------------------------------------
# Analysis: issues and their categories.
#
# The category list is FIXED (an analysis that returns another category is rejected, never guessed);
# each category maps to exactly one stage, which is how the plan is derived from the analysis.
ISSUE_CATEGORIES: dict[str, str] = {
    # algorithmic: a better algorithm / less work
    "algorithm_choice": "algorithmic",
    "redundant_computation": "algorithmic",
    # dtype_fix: wasteful or wrong precision
    "float64_usage": "dtype_fix",
    "precision_upcast": "dtype_fix",
    # fusion: separate launches / torch ops that could be one kernel
    "unfused_operations": "fusion",
    "extra_kernel_launches": "fusion",
    # memory_access: coalescing, redundant loads, masking, index width
    "uncoalesced_access": "memory_access",
    "redundant_loads": "memory_access",
    "int32_index_overflow": "memory_access",
    "host_device_sync": "memory_access",
    # block_pointers: raw pointer arithmetic that block pointers / tensor descriptors express better
    "manual_pointer_arithmetic": "block_pointers",
    # persistent_kernel: many small programs, launch/tail overhead
    "small_grid_or_tail_effect": "persistent_kernel",
    "launch_overhead": "persistent_kernel",
    # device_specific: settings for the device (warps, stages, swizzle, GRF mode, tensor cores)
    "device_tuning": "device_specific",
    "tensor_cores_unused": "device_specific",
    # autotuning: fixed tile/launch parameters
    "missing_autotune": "autotuning",
    "hardcoded_block_size": "autotuning",
    "hardcoded_launch_config": "autotuning",
    # discovery: anything else the analyst proposes (open ended)
    "open_ended": "discovery",
}

Severity = Literal["low", "medium", "high"]


@dataclass
class Issue:
    """One finding of an analysis.  ``category`` must be a key of :data:`ISSUE_CATEGORIES`."""

    category: str
    message: str
    line: int | None = None
    severity: Severity = "medium"
    source: str = "rules"  # "rules" (static analysis) or "llm"
    suggestion: str = ""

    @property
    def stage(self) -> str:
        return ISSUE_CATEGORIES[self.category]

    def as_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "stage": self.stage,
            "message": self.message,
            "line": self.line,
            "severity": self.severity,
            "source": self.source,
            "suggestion": self.suggestion,
        }


@runtime_checkable
class StaticAnalyzer(Protocol):
    """Extra static (rules) analysis a plugin contributes through ``kp_analyzers``.

    The core already runs its own Python-AST analysis for Python-based DSLs (triton, gluon); a plugin adds
    DSL-specific checks (or, for C++ DSLs, all of them) here.
    """

    dsl: str

    def analyze(self, source: str) -> list[Issue]:
        """Return issues found in ``source`` (categories from :data:`ISSUE_CATEGORIES`)."""
        ...


# ---------------------------------------------------------------------------------------------------
# LLM prompt templates (contract between the core's LLM engine and the DSL plugins' prompt folders).
#
# A DSL plugin returns ``ResourceDir(dsl=..., path=...)`` from ``kp_prompt_dirs``; the core loads
# Jinja2 templates from those folders (device-specific folders first).  Names it looks up:
#   ``analysis.md.j2``            -- system+user prompt asking for issues (reply schema appended by core)
#   ``stage_<stage>.md.j2``       -- optimize prompt for one stage, e.g. ``stage_autotuning.md.j2``
#   ``optimize.md.j2``            -- fallback optimize prompt for stages without their own template
# Each template is rendered with the variables in :data:`PROMPT_VARIABLES`; the core appends the
# reply-format instructions (JSON schema) itself, so templates never describe the reply format.
PROMPT_VARIABLES: dict[str, str] = {
    "dsl": "DSL name (triton, gluon, ...)",
    "device": "cuda | xpu | cpu",
    "stage": "the stage name (empty for analysis)",
    "stage_description": "one line on what the stage is for",
    "original_source": "the user's kernel",
    "current_source": "the stage's input (best so far)",
    "issues": "list of dicts (category, stage, message, line, severity, suggestion)",
    "feedback": "list of strings: why earlier attempts in this stage were rejected",
    "knowledge": "list of strings: KB snippets for this stage and device",
    "baseline_ms": "median ms of the original (None if not measured)",
    "current_ms": "median ms of the stage input (None if not measured)",
    "spec_summary": "short text describing inputs, dims and dtype of the variant",
    "attempt": "0-based attempt number within the stage",
    "hw": "dict of the device catalogue's numbers (empty when the device is unknown)",
    "device_text": "Markdown: device name, cores, memory, bandwidth, peaks, shared memory, register file",
    "problem": "dict: inputs (shape, dtype, bytes), init args, footprint, FLOPs, arithmetic intensity, bound",
    "problem_text": "Markdown of ``problem`` incl. roofline class and what the original achieves",
    "tuning": "dict: num_warps, num_stages, tile_m/n/k (user's or typical), group_size_m, grf_mode, target_dtype",
    "tuning_text": "Markdown of ``tuning``",
    "reference_source": "the PyTorch reference file ('' when the original kernel is the oracle)",
    "profile_summary": "a few lines of hardware counters of the stage input ('' when not profiled)",
    "autotune_configs": "list of strings: configs the rules engine would try for this kernel (may be empty)",
}
