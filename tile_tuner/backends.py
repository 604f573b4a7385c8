"""Where the loop's builds and measurements come from.

:class:`LocalBackend` builds with CMake + ninja into the content cache and runs the binaries on this
host's GPU; :class:`ReplayBackend` serves measurements from a store recorded on real hardware and builds
and runs nothing.  Dry runs are in :mod:`kernelpilot.tile_tuner.plan`.
"""

from __future__ import annotations

from typing import Any

from kernelpilot.tile_tuner.builder import BuildCache, BuildItem, BuildOutcome, build_batch
from kernelpilot.tile_tuner.measure import measure_binary, replay_result
from kernelpilot.tile_tuner.store import Measurement, ResultsStore, problem_key
from kernelpilot.tile_tuner.workload import (
    RoundItem,
    TuneOptions,
)


class LocalBackend:
    """Builds with CMake + ninja into the content cache and runs binaries on the local GPU."""

    name = "local"

    def __init__(self, kernel: Any, target: str, options: TuneOptions, target_model: Any = None) -> None:
        self.kernel = kernel
        self.target = target
        self.options = options
        self.recipe = kernel.build_recipe(
            target, {**options.kernel_options, "build_timeout_s": options.build_timeout_s}
        )
        kernel.check_runtime()  # raises ToolMissingError before any build (TileKernelBase: no-op)
        self.cache = BuildCache(options.cache_dir)
        self.device_name = detect_device_name(options.device, target_model)
        self.toolchain = self.recipe.toolchain_version
        self.library = self.recipe.library_version
        self.deadline: float | None = None

    def build(self, items: list[BuildItem]) -> dict[str, BuildOutcome]:
        return build_batch(
            items,
            self.recipe,
            self.cache,
            self.options.out_dir / "build",
            jobs=self.options.jobs,
            timeout_s=self.options.build_timeout_s,
            deadline=self.deadline,
            retry_failures=self.options.remeasure,
        )

    def measure(
        self, item: RoundItem, outcome: BuildOutcome | None, env: dict[str, str] | None = None
    ) -> tuple[str, str, dict[str, Any] | None, float]:
        """``env``: extra environment for the program (the GPU pool pins the GPU with it)."""
        if outcome is None or outcome.binary is None:
            status = outcome.status if outcome else "build_failed"
            return status, (outcome.message if outcome else "no build outcome"), None, 0.0
        return measure_binary(
            item.state.kernel, item.config, item.state.problem, outcome.binary,
            self.options.bench_args, self.options.run_timeout_s, env,
        )  # fmt: skip


class ReplayBackend:
    """Serves measurements from a store recorded on real hardware; builds and runs nothing."""

    name = "replay"

    def __init__(self, kernel: Any, target: str, options: TuneOptions, target_model: Any = None) -> None:
        assert options.replay is not None
        self.kernel = kernel
        self.target = target
        self.options = options
        self.replay = ResultsStore(options.replay, readonly=True)
        self.device_name = "replay"
        self.toolchain = "replay"
        self.library = "replay"

    def build(self, items: list[BuildItem]) -> dict[str, BuildOutcome]:
        return {}

    def lookup(self, item: RoundItem) -> Measurement | None:
        st = item.state
        return self.replay.replay_lookup(
            self.target,
            st.workload.kernel,
            st.problem["dtype"],
            st.problem.get("layout", ""),
            problem_key(st.problem),
            item.key,
        )

    def measure(
        self, item: RoundItem, outcome: BuildOutcome | None, env: dict[str, str] | None = None
    ) -> tuple[str, str, dict[str, Any] | None, float]:
        return replay_result(self.lookup(item))


def detect_device_name(user_device: str | None, target_model: Any = None) -> str:
    """The GPU's name for result keys: the user's choice wins, else what the target's vendor reports
    (``nvidia-smi`` for NVIDIA), else 'unknown'."""
    if user_device:
        return user_device
    name = target_model.vendor.device_name() if target_model is not None else None
    return name or "unknown"
