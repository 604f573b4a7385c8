"""The contract between the generic tile tuner and the backends that supply tile-tunable kernels.

A backend plugin (``cuda``, ``sycl``, or a third party) returns :class:`TileKernel` objects from the
``kp_tile_kernels`` hook.  The tuner never knows CUTLASS or sycl-tla: it asks the target model (from
``kp_target_models``) for legal configs, asks the kernel to render a program per config, builds the
programs with CMake + ninja, runs each binary, and parses its single JSON line with
:func:`parse_result_line`.  Both backends print the same JSON schema and use the same exit codes.

Optional extensions (:class:`TileKernelBase` gives each a no-op default, so a kernel that subclasses it
implements only what it has and the tuner calls them directly; the CUDA GEMM in
``dsl_plugins/cuda/gemm.py`` implements all of them):

* ``runs_variants_in_one_process: bool = False`` -- when True, the tuner calls ``run_command`` ONCE per
  (config, problem) with ``runtime = {"variants": runtime_variants(...), **bench_args}``; the program
  measures every run-time variant in one process and prints ONE JSON line whose ``runtime`` is the
  fastest verified variant and whose extra field ``variants`` lists ``{runtime, status, time_ms,
  tflops}`` per variant.  Any variant with a wrong result makes the line ``wrong_result`` (exit 4).
  When False, ``run_command`` is called once per variant with that variant's dict merged into
  ``runtime`` and the tuner keeps the fastest.
* ``variants_version: str`` -- bump when ``runtime_variants`` changes which run-time knobs are measured;
  it is appended to the template version in the results-store key (not in the build-cache key).
* ``check_runtime() -> None`` -- called before the first build of a real (not dry-run, not replay)
  run; raise ``ToolMissingError`` when the device or runtime is missing, so nothing is built in vain.
* ``min_bytes(problem) -> float | None`` -- compulsory device-memory traffic, for the roofline plot.
* ``vendor_baseline(problem, target, bench_args) -> baseline.VendorPlan`` -- what a user would call
  instead (cuBLAS, SDPA, oneDNN): a worker command printing this module's JSON line, or a reason why
  none can run; measured in the confirmation rounds (:mod:`kernelpilot.tile_tuner.confirm`).
* ``variant_from_runtime(runtime) -> dict | None`` -- the ``runtime_variants`` entry a program's reported
  ``runtime`` came from, when the program spells the knobs differently (the CUDA GEMM does).
* ``build_recipe(target, options)`` receives ``options["dry_run"] = True`` for ``--dry-run``: it must
  then return a recipe without requiring the compiler or the headers (use placeholders), because dry
  runs work on machines with neither.  Other keys: ``build_timeout_s``, ``cutlass_dir``.
* ``bench_args`` keys the tuner may put into ``runtime``: ``target_ms`` (timed ms per repetition),
  ``reps``, ``seed``; a program may ignore the ones it does not support.

Programs must verify before timing and print ``verification.passed``; a result the tuner computes above
the device's peak is recorded as ``above_peak`` (an error), never as a record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

# Exit codes every benchmark program uses (docs/tile_tuner.md#benchmark-program-contract).
EXIT_OK = 0
EXIT_CANNOT_RUN = 3  # the kernel cannot run this problem (can_implement failed, launch error, no device)
EXIT_WRONG_RESULT = 4  # ran, but the result disagrees with the reference
EXIT_USAGE = 2  # bad command-line arguments to the program

Status = Literal[
    "ok", "wrong_result", "cannot_run", "build_failed", "timeout", "crashed", "rejected", "invalid_timing"
]
INVALID_TIMING = "invalid_timing"  # the program claimed ok with a time no real launch can take


def is_plausible_time(value: Any) -> bool:
    """A launch time a GPU can report: a finite number of milliseconds > 0 (not 0, NaN, inf, < 0)."""
    return (
        isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    )


def implausible(raw: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(status, reason)`` when a result that says ``ok`` cannot be trusted, else ``None``.

    Why here: every path by which a measurement enters the tuner (a local run, a GPU pool or Dask
    worker, a replayed row) passes through this check, so a zero median can never divide a FLOP
    count, and a NaN or negative time, or a failed verification, can never become the best config."""
    verification = raw.get("verification")
    if isinstance(verification, Mapping) and verification.get("passed") is False:
        return "wrong_result", "the program reported status ok but verification.passed is false"
    times = raw.get("time_ms")
    if not isinstance(times, Mapping):
        return INVALID_TIMING, "the program reported status ok without time_ms"
    if not is_plausible_time(times.get("median")):
        return INVALID_TIMING, f"time_ms.median = {times.get('median')!r} is not a finite time > 0"
    for name in ("min", "max"):
        value = times.get(name)
        if value is not None and not is_plausible_time(value):
            return INVALID_TIMING, f"time_ms.{name} = {value!r} is not a finite time > 0"
    return None


class TimeStats(BaseModel):
    """Milliseconds per launch over the timed repetitions."""

    model_config = ConfigDict(extra="forbid")
    median: float
    min: float
    max: float
    repetitions: int = Field(ge=1)


class Verification(BaseModel):
    model_config = ConfigDict(extra="forbid")
    passed: bool
    max_error: float | None = None  # relative error measure the program used (documented per kernel)
    checked: list[dict[str, Any]] = Field(default_factory=list)  # problems checked (partial tiles + timed)
    reference: str = ""  # e.g. "cutlass::reference::device::Gemm", "host fp32 softmax"


class ProgramResult(BaseModel):
    """The one JSON line a benchmark program prints on stdout."""

    model_config = ConfigDict(extra="allow")
    status: Literal["ok", "wrong_result", "cannot_run"]
    kernel: str
    config: dict[str, Any]
    problem: dict[str, Any]
    runtime: dict[str, Any] = Field(default_factory=dict)  # run-time knobs used (raster, swizzle, splits)
    time_ms: TimeStats | None = None
    tflops: float | None = None
    gbps: float | None = None
    verification: Verification | None = None
    message: str = ""


def parse_result_line(stdout: str) -> ProgramResult:
    """Parse the *last* line of stdout that is a JSON object (programs may log before it)."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            return ProgramResult.model_validate(json.loads(line))
    raise ValueError("benchmark program printed no JSON result line")


def config_dict(config: Any) -> dict[str, Any]:
    """A target-model config object (``.as_dict()``) or a plain dict, as a new dict: kernels' ``render``
    takes either (the tuner passes objects, specs and tests pass dicts)."""
    if hasattr(config, "as_dict"):
        return dict(config.as_dict())
    if isinstance(config, dict):
        return dict(config)
    raise TypeError(f"unsupported config type {type(config).__name__}")


@dataclass(frozen=True)
class RenderedProgram:
    """Sources for one config: file name -> text, plus the CMake target they build."""

    target_name: str
    sources: dict[str, str]
    # extra per-target compile definitions/flags beyond the kernel's BuildRecipe
    compile_definitions: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BuildRecipe:
    """How every program of one kernel kind is compiled; part of the build-cache key."""

    compiler: str  # executable name or path, e.g. "nvcc", "icpx"
    language: Literal["CUDA", "CXX"]
    flags: tuple[str, ...]
    include_dirs: tuple[Path, ...]
    link_flags: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # build-time environment (e.g. IGC_ExtraOCLOptions)
    toolchain_version: str = ""  # compiler --version text, hashed into the cache key
    library_version: str = ""  # CUTLASS / sycl-tla version, hashed into the cache key
    memory_gb_per_job: float = 3.5  # for sizing the parallel build pool
    timeout_s: float = 900.0


@runtime_checkable
class TileKernel(Protocol):
    """One tile-tunable kernel kind on one backend."""

    kind: str  # "gemm" | "grouped_gemm" | "moe_gemm" | "fa_prefill" | "fa_decode"
    backend: str  # "cuda" | "sycl"
    targets: tuple[str, ...]  # target-model names this kernel serves ("sm90",) or ("bmg", "pvc")
    template_version: str  # bump when the template changes results; part of the results-store key

    def validate_problem(self, dims: dict[str, Any], dtype: Any, where: str) -> dict[str, Any]:
        """Normalize and validate workload dims; raise kernelpilot.errors.InputError naming ``where``."""
        ...

    def build_recipe(self, target: str, options: dict[str, Any]) -> BuildRecipe:
        """Compiler, flags and include dirs; raise ToolMissingError (clear message) if unavailable."""
        ...

    def render(self, config: Any, problem: dict[str, Any], target: str) -> RenderedProgram:
        """Render the complete benchmark program for ``config`` (a target-model config object).

        Only compile-time facts of ``problem`` (dtype, layout, head_dim, ...) may reach the source:
        sizes are run-time arguments, so one binary per config serves every shape of a batch and
        the content-addressed build cache builds it once.
        """
        ...

    def run_command(
        self, binary: Path, problem: dict[str, Any], runtime: dict[str, Any]
    ) -> tuple[list[str], dict[str, str]]:
        """argv and extra environment to run ``binary`` on ``problem`` with run-time knobs."""
        ...

    def runtime_variants(self, config: Any, problem: dict[str, Any]) -> list[dict[str, Any]]:
        """Run-time knob settings worth measuring for ``config`` (no rebuild): [{}] if none."""
        ...

    def flops(self, problem: dict[str, Any]) -> float:
        """Useful floating-point operations of one run of ``problem`` (for TFLOP/s and peak checks)."""
        ...

    # optional extensions (TileKernelBase has the defaults; see the module docstring)
    runs_variants_in_one_process: bool
    variants_version: str

    def check_runtime(self) -> None: ...

    def min_bytes(self, problem: dict[str, Any]) -> float | None: ...

    def vendor_baseline(self, problem: dict[str, Any], target: str, bench_args: dict[str, Any]) -> Any: ...

    def variant_from_runtime(self, runtime: dict[str, Any]) -> dict[str, Any] | None: ...


class TileKernelBase:
    """Base class of tile kernels: the optional extensions of :class:`TileKernel` with no-op defaults.

    A kernel subclasses it and overrides what it supports, so the tuner calls ``check_runtime()`` or
    ``min_bytes(problem)`` directly instead of probing with ``getattr``.  The required members
    (``kind``, ``render``, ``run_command``, ...) are the kernel's own.
    """

    runs_variants_in_one_process: bool = False
    variants_version: str = ""

    def check_runtime(self) -> None:
        """Raise ``ToolMissingError`` when the device or runtime is missing; default: nothing to check."""

    def min_bytes(self, problem: dict[str, Any]) -> float | None:
        """Compulsory device-memory traffic of ``problem`` (roofline plot); default: unknown."""
        return None

    def vendor_baseline(self, problem: dict[str, Any], target: str, bench_args: dict[str, Any]) -> Any:
        """A ``baseline.VendorPlan`` for what a user would call instead; default None: no baseline."""
        return None

    def variant_from_runtime(self, runtime: dict[str, Any]) -> dict[str, Any] | None:
        """The ``runtime_variants`` entry a program's reported ``runtime`` came from; default None:
        match the knobs by name."""
        return None
