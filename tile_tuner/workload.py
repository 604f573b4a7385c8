"""What the tuning loop works on: the workloads, the run's options, and per-workload state.

Plain data shared by the loop (:mod:`.engine`), the backends (:mod:`.backends`) and the run summary
(:mod:`.summary`), kept apart so none of them has to import another to name these types.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.tile_tuner.builder import BuildItem
from kernelpilot.tile_tuner.confirm import ConfirmOptions
from kernelpilot.tile_tuner.kernel_api import is_plausible_time
from kernelpilot.tile_tuner.proposers import History
from kernelpilot.tile_tuner.space import SearchSpace
from kernelpilot.tile_tuner.store import Measurement

FAILED_STATUSES = (
    "build_failed", "timeout", "cannot_run", "wrong_result", "crashed", "above_peak", "invalid_timing",
)  # fmt: skip


@dataclass
class Workload:
    """One problem to tune (validated by the batch loader)."""

    name: str
    kernel: str
    dtype: str
    dims: dict[str, Any]
    target: str
    proposer: str = "model"
    proposer_options: dict[str, Any] = field(default_factory=dict)  # validated by the proposer's Options
    budget_configs: int = 16
    patience: int | None = None
    space_filter: dict[str, list[Any]] | None = None
    #: where ``space_filter`` was given when not in the workload's ``space:`` (``--space-filter``)
    space_field: str = ""
    seed: int = 0
    source: str = ""  # "file.yaml: workloads[3]" for messages
    batch_size: int | None = None  # configs per proposal round (Xe-Forge files with the llm proposer: 5)


@dataclass
class TuneOptions:
    out_dir: Path
    store_path: Path
    cache_dir: Path
    jobs: int | None = None
    batch_size: int | None = None
    budget_minutes: float | None = None
    remeasure: bool = False
    replay: Path | None = None
    run_timeout_s: float = 120.0
    build_timeout_s: float = 900.0
    device: str | None = None
    bench_args: dict[str, Any] = field(default_factory=dict)
    kernel_options: dict[str, Any] = field(default_factory=dict)
    streamk_twins: bool = True
    command: str = ""
    gpus: str | None = None  # --gpus all|0,1,..: benchmark on every listed GPU (scaleout.gpu_pool)
    cluster: str | None = None  # --cluster tcp://HOST:8786|local: Dask distributed (scaleout.dask_executor)
    # --finalists / --confirm-rounds / --no-baseline: what runs after the search (tile_tuner.confirm)
    confirm: ConfirmOptions = field(default_factory=ConfirmOptions)


@dataclass
class Tried:
    """One config tried for one workload (what the run JSON lists)."""

    config: dict[str, Any]
    label: str
    status: str
    reason: str = ""
    time_ms: float | None = None
    tflops: float | None = None
    runtime: dict[str, Any] | None = None
    source: str = "measured"  # measured | store | replay
    is_default: bool = False
    order: int = 0
    build_s: float = 0.0
    run_s: float = 0.0
    variants: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class WorkloadState:
    workload: Workload
    problem: dict[str, Any]
    space: SearchSpace
    proposer: Any
    kernel: Any
    history: History = field(default_factory=History)
    tried: list[Tried] = field(default_factory=list)
    default_key: str = ""
    default_cfg: Any = None
    done: bool = False
    stop_reason: str = ""
    propose_s: float = 0.0
    build_s: float = 0.0
    bench_s: float = 0.0
    best_trace: list[float | None] = field(default_factory=list)  # best-so-far after each measurement

    @property
    def measured(self) -> int:
        return len(self.tried)

    def best(self) -> Tried | None:
        ok = [t for t in self.tried if t.status == "ok" and is_plausible_time(t.time_ms)]
        return min(ok, key=lambda t: t.time_ms) if ok else None  # type: ignore[arg-type, return-value]


@dataclass
class RoundItem:
    state: WorkloadState
    config: Any
    key: str
    build: BuildItem | None  # None: served from the store / replay
    stored: Measurement | None = None


@dataclass
class Round:
    items: list[RoundItem]
    future: Future | None = None
