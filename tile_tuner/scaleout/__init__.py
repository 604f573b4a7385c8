"""Scale-out of the tile tuner: every GPU of a host (``--gpus``) and many hosts on Dask (``--cluster``).

The tuning loop (:mod:`kernelpilot.tile_tuner.engine`) stays the single place that proposes, records
and observes; it hands the two expensive steps -- building a round's programs and benchmarking the
built configs -- to an *executor* (:mod:`.base`).  Three executors implement the same small
interface:

* :class:`~.base.InProcessExecutor` (default): one build thread (ninja is the process pool) and serial
  benchmarks on the process's GPU -- exactly the loop's historical behaviour;
* :class:`~.gpu_pool.GpuPoolExecutor` (``--gpus all|0,1``): the same builds, one benchmark thread per
  GPU, every benchmark process pinned to its GPU, never two at once on one GPU;
* :class:`~.dask_executor.DaskExecutor` (``--cluster tcp://HOST:8786|local``): builds on any worker,
  benchmarks on workers that declare a ``GPU`` resource, binaries carried in task results; the client
  stays the only writer of the results store.

:func:`~.factory.make_executor` picks one from the tune options.
"""

from __future__ import annotations

from kernelpilot.tile_tuner.scaleout.base import Executor, InProcessExecutor, MeasureRequest
from kernelpilot.tile_tuner.scaleout.factory import make_executor

__all__ = ["Executor", "InProcessExecutor", "MeasureRequest", "make_executor"]
