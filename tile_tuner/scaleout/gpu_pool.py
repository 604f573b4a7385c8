"""One host, every GPU: builds in the background, one benchmark worker per GPU.

Why threads and not processes: a benchmark is already a separate process (the built program); the
thread only waits for it.  Each GPU is a token in a queue: a thread takes a token, runs one benchmark
pinned to that GPU (``CUDA_VISIBLE_DEVICES`` / ``ZE_AFFINITY_MASK`` in the program's environment),
and gives the token back -- so two benchmarks never share a GPU, and N GPUs drain a round N times
faster.  Builds use the same path as the in-process executor (one ninja project per round, ``--jobs``
sized from cores and memory), on their own thread, so the next round compiles while this one runs.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any

from kernelpilot.tile_tuner.scaleout.base import BusyClock, MeasureRequest, MeasureResult
from kernelpilot.tile_tuner.scaleout.gpus import pin_env


class GpuPoolExecutor:
    """Benchmarks on every GPU of ``gpus`` (physical ids), at most one at a time per GPU."""

    name = "gpu-pool"

    def __init__(self, gpus: list[str], vendor: str = "cuda") -> None:
        if not gpus:
            raise ValueError("GpuPoolExecutor needs at least one GPU")
        self.gpus = list(gpus)
        self.vendor = vendor
        self.clock = BusyClock()
        self.per_gpu: dict[str, int] = {g: 0 for g in self.gpus}
        self._tokens: queue.Queue[str] = queue.Queue()
        for g in self.gpus:
            self._tokens.put(g)
        self._build_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kp-build")
        self._bench_pool = ThreadPoolExecutor(max_workers=len(self.gpus), thread_name_prefix="kp-bench")

    # ---- builds --------------------------------------------------------------------------------
    def _build(self, backend: Any, items: list[Any]) -> Any:
        token = self.clock.start("build")
        try:
            return backend.build(items)
        finally:
            self.clock.stop(token)

    def submit_build(self, backend: Any, items: list[Any]) -> Future:
        return self._build_pool.submit(self._build, backend, items)

    # ---- benchmarks ----------------------------------------------------------------------------
    def _one(
        self, backend: Any, req: MeasureRequest, stop: Callable[[], bool]
    ) -> tuple[MeasureRequest, MeasureResult | None, float]:
        gpu = self._tokens.get()  # blocks until a GPU is free: never two benchmarks on one GPU
        try:
            if stop():
                return req, None, 0.0
            token = self.clock.start("bench")
            t0 = time.monotonic()
            try:
                result = backend.measure(req.item, req.outcome, env=pin_env(self.vendor, gpu))
            finally:
                self.clock.stop(token)
            self.per_gpu[gpu] += 1
            return req, result, time.monotonic() - t0
        finally:
            self._tokens.put(gpu)

    def measure(
        self, backend: Any, requests: list[MeasureRequest], stop: Callable[[], bool]
    ) -> Iterator[tuple[MeasureRequest, MeasureResult | None, float]]:
        futures = [self._bench_pool.submit(self._one, backend, req, stop) for req in requests]
        for fut in as_completed(futures):
            yield fut.result()

    def describe(self) -> dict[str, Any]:
        return {
            "executor": self.name,
            "gpus": self.gpus,
            "vendor": self.vendor,
            "benchmarks_per_gpu": dict(self.per_gpu),
            **self.clock.summary(),
        }

    def close(self) -> None:
        self._bench_pool.shutdown(wait=True)
        self._build_pool.shutdown(wait=True)
