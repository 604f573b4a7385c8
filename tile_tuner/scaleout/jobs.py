"""Work units that travel to Dask workers: build a chunk of programs, benchmark one config, replay one.

Why plain picklable dataclasses and module-level functions: a worker (possibly on another host)
receives only data, rebuilds what it needs locally (the TileKernel from the plugin registry, the
build recipe from its own toolchain) and calls the same functions the local loop calls
(:func:`~kernelpilot.tile_tuner.builder.build_batch`, :func:`~kernelpilot.tile_tuner.measure.measure_binary`,
:func:`~kernelpilot.tile_tuner.measure.replay_result`), so a cluster run measures exactly what a local
run measures.  Built binaries travel as bytes inside :class:`BuiltBinary` (a CUTLASS program is a few
MB); the benchmark worker writes them into its own content-addressed folder once.

Nothing here writes the results store: results go back to the client, the single writer.
"""

from __future__ import annotations

import functools
import os
import socket
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelpilot.errors import ToolMissingError
from kernelpilot.tile_tuner.kernels import get_tile_kernel
from kernelpilot.tile_tuner.measure import measure_binary, replay_result


@dataclass(frozen=True)
class BuildChunk:
    """Programs one worker builds in one ninja project."""

    kind: str  # TileKernel.kind
    target: str
    kernel_options: dict[str, Any]
    fingerprint: str  # recipe_fingerprint of the client's recipe: the worker's must match
    items: tuple[Any, ...]  # builder.BuildItem
    cache_dir: str  # the client's build cache (shared on one host / a shared file system)
    work_dir: str
    jobs: int | None
    timeout_s: float
    deadline: float | None = None  # wall-clock end of --budget-minutes (time.time() scale)
    kernel: Any = None  # the TileKernel object (pickled by reference to its class); None: by kind


@dataclass(frozen=True)
class BuiltBinary:
    """One build outcome; ``data`` holds the program bytes when the build succeeded."""

    cache_key: str
    status: str  # built | cached | build_failed | timeout
    message: str
    seconds: float
    path: str | None  # where the build worker keeps it (informational on other hosts)
    host: str
    data: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class BenchJob:
    """Benchmark one built config on one problem on the GPU this worker is pinned to."""

    kind: str
    target: str
    config: Any
    problem: dict[str, Any]
    bench_args: dict[str, Any]
    timeout_s: float
    cache_key: str
    kernel: Any = None  # as in BuildChunk
    gpu_env: str = ""  # the vendor's visibility variable the worker is pinned with (worker_identity)


@dataclass(frozen=True)
class ReplayJob:
    """Serve one recorded measurement (``--replay``): the GPU-free stand-in for :class:`BenchJob`."""

    replay_path: str
    target: str
    kernel: str
    dtype: str
    layout: str
    problem: str  # store.problem_key(...)
    config_key: str
    gpu_env: str = ""  # as in BenchJob


@functools.cache
def _tile_kernel(kind: str, target: str) -> Any:
    return get_tile_kernel(kind, target)


@functools.cache
def _replay_store(path: str) -> Any:
    from kernelpilot.tile_tuner.store import ResultsStore

    return ResultsStore(path, readonly=True)


def _usable_dir(preferred: str, fallback_name: str) -> Path:
    """``preferred`` if this worker can create it, else a folder under the worker's temp dir."""
    try:
        path = Path(preferred)
        path.mkdir(parents=True, exist_ok=True)
        if os.access(path, os.W_OK):
            return path
    except OSError:
        pass
    path = Path(tempfile.gettempdir()) / f"kernelpilot-worker-{os.getuid()}" / fallback_name
    path.mkdir(parents=True, exist_ok=True)
    return path


def worker_identity(gpu_env: str = "") -> dict[str, str]:
    """Which worker ran a task, and which GPU it is pinned to (for the run's accounting).

    ``gpu_env`` is the vendor's visibility variable (``GpuVendor.visible_devices_env`` of the run's
    target) that the worker was started with; the client names it in the job because which variable
    pins a GPU is the vendor's business, not this module's."""
    name = ""
    try:
        from distributed import get_worker

        name = str(get_worker().name)
    except (ImportError, ValueError):
        name = ""
    gpu = os.environ.get(gpu_env, "") if gpu_env else ""
    return {"worker": name, "host": socket.gethostname(), "gpu": gpu}


def warm_worker() -> str:
    """Load this module (and with it the builder and the measurement code) once per worker, ahead of
    its first task.  Not the plugin registry: tasks carry their TileKernel (its module is imported when
    the task is unpickled), and loading every plugin would import Triton for nothing."""
    return socket.gethostname()


def run_build_chunk(chunk: BuildChunk) -> dict[str, BuiltBinary]:
    """Build ``chunk`` with this worker's toolchain into the (shared or local) content cache."""
    from kernelpilot.tile_tuner.builder import BuildCache, build_batch, recipe_fingerprint

    kernel = chunk.kernel or _tile_kernel(chunk.kind, chunk.target)
    recipe = kernel.build_recipe(chunk.target, {**chunk.kernel_options, "build_timeout_s": chunk.timeout_s})
    if recipe_fingerprint(recipe) != chunk.fingerprint:
        # a different compiler or CUTLASS would build different binaries under the same cache keys
        raise ToolMissingError(
            f"worker on {socket.gethostname()} has a different toolchain than the client "
            f"({recipe.toolchain_version.splitlines()[-1:] or ['?']} / {recipe.library_version}): "
            "install the same nvcc/icpx and CUTLASS/sycl-tla on every build worker"
        )
    cache = BuildCache(_usable_dir(chunk.cache_dir, "build_cache"))
    work = _usable_dir(chunk.work_dir, "build")
    outcomes = build_batch(
        list(chunk.items),
        recipe,
        cache,
        work,
        jobs=chunk.jobs,
        timeout_s=chunk.timeout_s,
        deadline=chunk.deadline,
    )
    host = socket.gethostname()
    out: dict[str, BuiltBinary] = {}
    for key, o in outcomes.items():
        data = o.binary.read_bytes() if o.binary is not None else None
        out[key] = BuiltBinary(
            key, o.status, o.message, o.seconds, str(o.binary) if o.binary else None, host, data
        )
    return out


def pick(built: dict[str, BuiltBinary], key: str) -> BuiltBinary:
    """One program out of a chunk (runs where the chunk is, so only this program moves on)."""
    return built[key]


def strip(built: dict[str, BuiltBinary]) -> dict[str, BuiltBinary]:
    """The chunk's outcomes without the bytes (what the client needs to know)."""
    return {k: replace(v, data=None) for k, v in built.items()}


def materialize(binary: BuiltBinary) -> Path:
    """The program as an executable file on this worker: the build path if it is here and intact,
    else written once into ``$KERNELPILOT_WORKER_CACHE`` (default: the temp dir) by cache key."""
    if binary.data is None:
        raise ValueError(f"no program bytes for {binary.cache_key} ({binary.status})")
    if binary.path and binary.host == socket.gethostname():
        local = Path(binary.path)
        if local.exists() and local.stat().st_size == len(binary.data):
            return local
    root = Path(
        os.environ.get("KERNELPILOT_WORKER_CACHE")
        or Path(tempfile.gettempdir()) / f"kernelpilot-worker-{os.getuid()}"
    )
    final = root / "binaries" / binary.cache_key / "program"
    if final.exists() and final.stat().st_size == len(binary.data):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".program.{os.getpid()}.tmp")
    tmp.write_bytes(binary.data)
    tmp.chmod(0o755)
    os.replace(tmp, final)  # atomic: a concurrent reader never sees half a program
    return final


def run_bench(
    job: BenchJob, binary: BuiltBinary
) -> tuple[tuple[str, str, dict[str, Any] | None, float], float, dict[str, str]]:
    """Benchmark on this worker's GPU (the worker process is pinned at start; see docs/distributed.md)."""
    t0 = time.monotonic()
    path = materialize(binary)
    kernel = job.kernel or _tile_kernel(job.kind, job.target)
    result = measure_binary(kernel, job.config, job.problem, path, job.bench_args, job.timeout_s)
    return result, time.monotonic() - t0, worker_identity(job.gpu_env)


def run_replay(job: ReplayJob) -> tuple[tuple[str, str, dict[str, Any] | None, float], float, dict[str, str]]:
    """Serve a recorded measurement on a GPU worker (exercises the cluster path without a GPU)."""
    t0 = time.monotonic()
    store = _replay_store(job.replay_path)
    m = store.replay_lookup(job.target, job.kernel, job.dtype, job.layout, job.problem, job.config_key)
    return replay_result(m), time.monotonic() - t0, worker_identity(job.gpu_env)
