"""The executor seam between the tuning loop and where builds and benchmarks run.

Why a seam and not a second loop: proposing, recording into the results store and feeding results
back must happen in ONE place (the client), so the store has a single writer and a distributed run
gives the same answers as a local one.  The loop therefore only asks an executor to

* ``submit_build(backend, items)`` -> a future of ``{cache_key: BuildOutcome}`` (one round's programs);
* ``measure(backend, requests, stop)`` -> yields ``(request, result, seconds)`` as benchmarks finish,
  in any order; ``result`` is the backend's ``(status, reason, raw_json, run_s)`` tuple, or ``None``
  for a request that was not started because ``stop()`` said the time budget is spent.

The loop records each result the moment it arrives and feeds them back in request order, so the
proposers see the same history whatever order the GPUs finished in.

Every executor also keeps wall-clock accounting (:class:`BusyClock`): how long at least one build,
and at least one benchmark, was in flight -- the numbers the scale-out benchmarks report.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

MeasureResult = tuple[str, str, "dict[str, Any] | None", float]


@dataclass
class MeasureRequest:
    """One built config to benchmark: the loop's round item plus its build outcome."""

    index: int  # position in the loop's round (results are fed back in this order)
    item: Any  # engine.RoundItem (state, config, key, build)
    outcome: Any  # builder.BuildOutcome or None


class Executor(Protocol):
    """Where a round is built and benchmarked (see the module docstring)."""

    name: str

    def submit_build(self, backend: Any, items: list[Any]) -> Future: ...

    def measure(
        self, backend: Any, requests: list[MeasureRequest], stop: Callable[[], bool]
    ) -> Iterator[tuple[MeasureRequest, MeasureResult | None, float]]: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class BusyClock:
    """Union of wall-clock intervals per activity ("build", "bench"): overlap counted once.

    Thread-safe; ``start`` returns a token for ``stop``.  ``busy(kind)`` is the time during which at
    least one activity of that kind was running, so N GPUs benchmarking in parallel count once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._intervals: dict[str, list[list[float]]] = {}

    def start(self, kind: str) -> list[float]:
        iv = [time.monotonic(), float("nan")]
        with self._lock:
            self._intervals.setdefault(kind, []).append(iv)
        return iv

    @staticmethod
    def stop(token: list[float]) -> None:
        token[1] = time.monotonic()

    def busy(self, kind: str) -> float:
        now = time.monotonic()
        with self._lock:
            ivs = sorted((a, b if b == b else now) for a, b in self._intervals.get(kind, []))
        total, cur_a, cur_b = 0.0, None, None
        for a, b in ivs:
            if cur_b is None or a > cur_b:
                if cur_b is not None:
                    total += cur_b - cur_a  # type: ignore[operator]
                cur_a, cur_b = a, b
            else:
                cur_b = max(cur_b, b)
        if cur_b is not None:
            total += cur_b - cur_a  # type: ignore[operator]
        return total

    def count(self, kind: str) -> int:
        with self._lock:
            return len(self._intervals.get(kind, []))

    def summary(self) -> dict[str, Any]:
        return {
            "build_busy_s": round(self.busy("build"), 3),
            "bench_busy_s": round(self.busy("bench"), 3),
            "builds": self.count("build"),
            "benchmarks": self.count("bench"),
        }


class InProcessExecutor:
    """The default: one background build thread (ninja inside is the parallel compile pool) and the
    benchmarks one after another on this process's GPU -- the loop's original behaviour."""

    name = "in-process"

    def __init__(self) -> None:
        self.clock = BusyClock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kp-build")

    def _build(self, backend: Any, items: list[Any]) -> Any:
        token = self.clock.start("build")
        try:
            return backend.build(items)
        finally:
            self.clock.stop(token)

    def submit_build(self, backend: Any, items: list[Any]) -> Future:
        return self._pool.submit(self._build, backend, items)

    def measure(
        self, backend: Any, requests: list[MeasureRequest], stop: Callable[[], bool]
    ) -> Iterator[tuple[MeasureRequest, MeasureResult | None, float]]:
        for req in requests:
            if stop():
                yield req, None, 0.0
                continue
            token = self.clock.start("bench")
            t0 = time.monotonic()
            try:
                result = backend.measure(req.item, req.outcome)
            finally:
                self.clock.stop(token)
            yield req, result, time.monotonic() - t0

    def describe(self) -> dict[str, Any]:
        return {"executor": self.name, **self.clock.summary()}

    def close(self) -> None:
        self._pool.shutdown(wait=True)
