"""The vendor baseline: what a user would call instead of the tuned kernel, measured like the programs.

Why: a tuning run that only compares configs with each other cannot say whether the winner beats the
library the user already has.  The baseline is target-specific, so the tuner never knows cuBLAS or
oneDNN: a tile kernel may implement the optional method

    ``vendor_baseline(problem, target, bench_args) -> VendorPlan``

returning either a command to run (a worker process that prints the same one-line JSON result as the
benchmark programs: ``status``, ``time_ms``, plus ``backend``, ``versions`` and ``candidates``) or a
plain reason why no baseline can run here.  A kernel without the method gets a plan whose reason says
so.  The worker is a separate process for the same reason the programs are: each confirmation round
is a fresh process, so a warm allocator or a lucky clock state in one run cannot leak into the next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelpilot.tile_tuner.runner import run_program

MeasureResult = tuple[str, str, "dict[str, Any] | None", float]


@dataclass(frozen=True)
class VendorPlan:
    """How to measure the vendor path for one problem, or why it cannot be measured."""

    name: str  # what the user would call, e.g. "cuBLAS via torch.matmul"
    argv: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    reason: str = ""  # non-empty: no baseline can run (argv is then empty)

    @property
    def runnable(self) -> bool:
        return bool(self.argv) and not self.reason


def plan_for(kernel: Any, problem: dict[str, Any], target: str, bench_args: dict[str, Any]) -> VendorPlan:
    """The kernel's vendor plan; a kernel that supplies none, or whose planner fails, gets a reason."""
    hook = getattr(kernel, "vendor_baseline", None)
    if hook is None:
        return VendorPlan(
            name="none",
            reason=f"the {getattr(kernel, 'backend', '?')} backend supplies no vendor baseline for "
            f"{getattr(kernel, 'kind', '?')} on {target}",
        )
    try:
        return hook(problem, target, dict(bench_args))
    except Exception as exc:  # noqa: BLE001 - a broken planner must not kill the run; say why
        return VendorPlan(name="none", reason=f"vendor baseline planner failed: {type(exc).__name__}: {exc}")


def run_plan(plan: VendorPlan, timeout_s: float) -> MeasureResult:
    """One fresh run of the baseline worker: ``(status, reason, raw JSON, seconds)`` like a program."""
    if not plan.runnable:
        return "cannot_run", plan.reason or "no command", None, 0.0
    run = run_program(list(plan.argv), plan.env, timeout_s)
    return run.status, run.message, run.raw or None, run.seconds
