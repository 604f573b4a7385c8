"""Pick the executor the tune options ask for.

Apart from :mod:`.base` because it names every executor: the executors import the base, and the base
importing them back would close a cycle.  Dask itself is imported only when a cluster is used.
"""

from __future__ import annotations

from typing import Any

from kernelpilot.tile_tuner.scaleout.base import Executor, InProcessExecutor
from kernelpilot.tile_tuner.scaleout.dask_executor import DaskExecutor
from kernelpilot.tile_tuner.scaleout.gpu_pool import GpuPoolExecutor
from kernelpilot.tile_tuner.scaleout.gpus import resolve_gpus, vendor_of


def make_executor(options: Any, groups: list[Any] | None = None) -> Executor:
    """The executor the tune options ask for: ``options.cluster`` (Dask) wins over ``options.gpus``
    (one host's GPU pool); neither -> :class:`InProcessExecutor`.

    ``groups`` (the batch's kernel groups) tell which vendor's pinning variables to use
    (``CUDA_VISIBLE_DEVICES`` for the cuda backend, ``ZE_AFFINITY_MASK`` for sycl).
    """
    cluster = getattr(options, "cluster", None)
    gpus: str | None = getattr(options, "gpus", None)
    if not cluster and not gpus:
        return InProcessExecutor()
    vendor = vendor_of(groups or [])
    replay = bool(getattr(options, "replay", None))
    if cluster:
        return DaskExecutor.from_options(options, vendor)
    return GpuPoolExecutor(resolve_gpus(gpus or "", vendor, replay=replay), vendor)
