"""Many hosts: builds and benchmarks as Dask distributed tasks (``--cluster tcp://HOST:8786|local``).

Why Dask: pure Python, a scheduler that already knows resources, data locality, retries and worker
loss, and it deploys on SLURM (dask-jobqueue), Kubernetes (dask-kubernetes) or by hand with wheels.

How a round runs:

* **Builds run anywhere.**  The round's programs are split into one chunk per host (ninja inside the
  chunk is the host's compile pool, ``--jobs`` or sized from that host's cores and memory) and sent to
  one worker of each host (``allow_other_workers``: a lost host's chunk moves on).  Each chunk result
  holds the programs' bytes; a tiny ``pick`` task per program splits it where it lies.
* **Benchmarks need a GPU.**  Every benchmark task asks for the resource ``GPU=1``; GPU workers
  declare ``--resources GPU=1`` and are pinned to one GPU each, so a GPU never runs two benchmarks.
  The program's bytes move to the GPU worker as the task's input.
* **The client is the single writer.**  Tasks return results; the tuning loop records them.  Task
  keys are deterministic (a hash of what is measured), a task lost with its worker is rescheduled by
  the scheduler and exceptions are retried (``retries``); each request yields exactly one result,
  so nothing is lost or recorded twice.

``--cluster local`` starts a local cluster with one worker per GPU of ``--gpus`` (default ``all``),
each pinned with ``CUDA_VISIBLE_DEVICES`` / ``ZE_AFFINITY_MASK`` and declaring ``GPU=1``.
The connection starts in the background once the flags are valid (timeouts: ``KERNELPILOT_DASK_CONNECT_S``, ``KERNELPILOT_DASK_WAIT_S``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kernelpilot.errors import InputError, ToolMissingError
from kernelpilot.tile_tuner.scaleout import jobs
from kernelpilot.tile_tuner.scaleout.base import BusyClock, MeasureRequest, MeasureResult

BENCH_RETRIES = 2  # a task that raises is tried again (worker loss is handled by the scheduler)
WAIT_FOR_GPU_WORKERS_S = float(os.environ.get("KERNELPILOT_DASK_WAIT_S", "60"))
CONNECT_TIMEOUT_S = float(os.environ.get("KERNELPILOT_DASK_CONNECT_S", "30"))


def _digest(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(repr(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def validate_cluster(address: str) -> str:
    """``local`` or a scheduler address such as ``tcp://host:8786``; anything else is an InputError."""
    text = address.strip()
    if text == "local":
        return text
    if "://" not in text or not text.split("://", 1)[1]:
        raise InputError(
            f"{address!r}: expected 'local' or a scheduler address such as tcp://HOST:8786", field="--cluster"
        )
    return text


def start_local_cluster(gpus: list[str], vendor: str, threads_per_worker: int = 2) -> Any:
    """One Dask worker process per GPU, pinned to it and declaring ``GPU=1``.

    Two threads per worker: one benchmark (the GPU resource caps it at one) and one build chunk can
    run side by side, so builds overlap benchmarks.  ``memory_limit=0``: compiles run in child
    processes and must not make the nanny restart a worker.
    """
    from distributed import Nanny, Scheduler, SpecCluster

    from kernelpilot.tile_tuner.scaleout.gpus import pin_env

    workers = {
        f"gpu-{g}": {
            "cls": Nanny,
            "options": {
                "nthreads": threads_per_worker,
                "resources": {"GPU": 1},
                "env": pin_env(vendor, g),
                "memory_limit": 0,
                "host": "127.0.0.1",
                "dashboard": False,
                "silence_logs": logging.ERROR,
            },
        }
        for g in gpus
    }
    scheduler = {
        "cls": Scheduler,
        "options": {"host": "127.0.0.1", "port": 0, "dashboard": False, "dashboard_address": ":0"},
    }
    return SpecCluster(
        workers=workers, scheduler=scheduler, silence_logs=logging.ERROR, name="kernelpilot-local"
    )


class DaskExecutor:
    """Executor on a Dask distributed cluster (see the module docstring)."""

    name = "dask"

    def __init__(
        self,
        address: str,
        *,
        gpus: list[str] | None = None,
        vendor: str = "cuda",
        client: Any = None,
        options: Any = None,
    ) -> None:
        self.address = validate_cluster(address) if client is None else address
        self.gpus = gpus
        self.vendor = vendor
        self.options = options
        self.clock = BusyClock()
        self._client = client
        self._owns_client = client is None
        self._cluster: Any = None
        self._lock = threading.Lock()
        self._binaries: dict[str, Any] = {}  # cache_key -> Dask future of jobs.BuiltBinary
        self._build_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kp-dask-build")
        self.per_worker: dict[str, int] = {}
        self.worker_gpus: dict[str, str] = {}  # worker name -> the GPU it is pinned to (as it reported)
        self.failures: list[str] = []
        self.startup_s = 0.0

    @classmethod
    def from_options(cls, options: Any, vendor: str) -> DaskExecutor:
        address = validate_cluster(options.cluster)
        gpus = None
        if address == "local":
            from kernelpilot.tile_tuner.scaleout.gpus import resolve_gpus

            gpus = resolve_gpus(options.gpus or "all", vendor, replay=bool(options.replay))
        elif options.gpus:
            raise InputError(
                "--gpus picks GPUs of this host; with a remote --cluster the GPU workers decide "
                "(start one worker per GPU with --resources GPU=1)",
                field="--gpus",
            )
        return cls(address, gpus=gpus, vendor=vendor, options=options).start()

    # ---- connection ----------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                t0 = time.monotonic()
                from distributed import Client

                if self.address == "local":
                    self._cluster = start_local_cluster(self.gpus or ["0"], self.vendor)
                    self._client = Client(self._cluster)
                else:
                    try:
                        self._client = Client(self.address, timeout=f"{CONNECT_TIMEOUT_S}s")
                    except OSError as exc:
                        raise ToolMissingError(
                            f"--cluster {self.address}: cannot reach the scheduler: {exc}"
                        ) from exc
                self._wait_for_gpu_workers(self._client)
                self._client.run(jobs.warm_worker)  # imports + plugin registry before the first task
                self.startup_s = time.monotonic() - t0
            return self._client

    def start(self) -> DaskExecutor:
        """Connect (or start the local cluster) in the background while the loop validates the
        batch and renders the first round; the first build or benchmark waits for it."""
        self._build_pool.submit(lambda: self.client)
        return self

    @staticmethod
    def _gpu_slots(client: Any) -> int:
        workers = client.scheduler_info(n_workers=-1)["workers"].values()
        return int(sum(w.get("resources", {}).get("GPU", 0) for w in workers))

    def _wait_for_gpu_workers(self, client: Any) -> None:
        deadline = time.monotonic() + WAIT_FOR_GPU_WORKERS_S
        while self._gpu_slots(client) < 1:
            if time.monotonic() > deadline:
                raise ToolMissingError(
                    f"--cluster {self.address}: no worker declares a GPU resource after "
                    f"{WAIT_FOR_GPU_WORKERS_S:.0f} s; start GPU workers with `dask worker ... --resources GPU=1`"
                )
            time.sleep(0.5)

    # ---- builds --------------------------------------------------------------------------------
    def submit_build(self, backend: Any, items: list[Any]) -> Future:
        if getattr(backend, "name", "") != "local" or not items:
            return self._build_pool.submit(backend.build, items)  # replay: nothing to build
        return self._build_pool.submit(self._remote_build, backend, items)

    def _hosts(self) -> list[str]:
        """One worker address per host (GPU workers first: they exist on every useful host)."""
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        by_host: dict[str, str] = {}
        for addr, w in sorted(info.items(), key=lambda kv: -kv[1].get("resources", {}).get("GPU", 0)):
            by_host.setdefault(w.get("host", addr), addr)
        return list(by_host.values())

    def _remote_build(self, backend: Any, items: list[Any]) -> dict[str, Any]:
        from kernelpilot.tile_tuner.builder import BuildOutcome, recipe_fingerprint

        token = self.clock.start("build")
        try:
            client = self.client
            unique = list({i.cache_key: i for i in items}.values())
            hosts = self._hosts()
            n = max(1, min(len(hosts), len(unique)))
            opts = backend.options
            chunks = []
            for h in range(n):
                part = tuple(unique[h::n])
                chunk = jobs.BuildChunk(
                    kind=backend.kernel.kind,
                    target=backend.target,
                    kernel_options=dict(opts.kernel_options),
                    fingerprint=recipe_fingerprint(backend.recipe),
                    items=part,
                    cache_dir=str(Path(opts.cache_dir).resolve()),
                    work_dir=str((Path(opts.out_dir) / "build").resolve()),
                    jobs=opts.jobs,
                    timeout_s=opts.build_timeout_s,
                    deadline=getattr(backend, "deadline", None),
                    kernel=backend.kernel,
                )
                key = "kp-build-" + _digest(chunk.fingerprint, [i.cache_key for i in part])
                fut = client.submit(
                    jobs.run_build_chunk,
                    chunk,
                    key=key,
                    workers=[hosts[h]],
                    allow_other_workers=True,
                    retries=1,
                )
                chunks.append((fut, part))
            metas = []
            for fut, part in chunks:
                for item in part:
                    self._binaries[item.cache_key] = client.submit(
                        jobs.pick, fut, item.cache_key, key=f"kp-bin-{item.cache_key}-{fut.key[-8:]}"
                    )
                metas.append(client.submit(jobs.strip, fut, key=f"kp-meta-{fut.key}"))
            outcomes: dict[str, Any] = {}
            for built in client.gather(metas):  # a build error (e.g. no cmake) raises here, as locally
                for key, b in built.items():
                    outcomes[key] = BuildOutcome(
                        key, b.status, Path(b.path) if b.path else None, None, b.seconds, message=b.message
                    )
            return outcomes
        finally:
            self.clock.stop(token)

    # ---- benchmarks ----------------------------------------------------------------------------
    def _gpu_env(self) -> str:
        """The variable this run's vendor pins workers' GPUs with (read back by jobs.worker_identity)."""
        from kernelpilot.tile_tuner.scaleout.gpus import gpu_vendor

        return gpu_vendor(self.vendor).visible_devices_env

    def _job(
        self, backend: Any, req: MeasureRequest
    ) -> tuple[Callable[..., Any], tuple[Any, ...], str] | MeasureResult:
        """The task for one request, or the result at once when there is nothing to run."""
        from kernelpilot.tile_tuner.store import problem_key

        item, st = req.item, req.item.state
        if getattr(backend, "name", "") == "replay":
            replay = jobs.ReplayJob(
                replay_path=str(Path(backend.options.replay).resolve()),
                target=backend.target,
                kernel=st.workload.kernel,
                dtype=st.problem["dtype"],
                layout=str(st.problem.get("layout", "")),
                problem=problem_key(st.problem),
                config_key=item.key,
                gpu_env=self._gpu_env(),
            )
            return jobs.run_replay, (replay,), "kp-replay-" + _digest(replay)
        outcome = req.outcome
        if outcome is None or outcome.binary is None:  # as LocalBackend.measure: a failed build
            status = outcome.status if outcome else "build_failed"
            return status, (outcome.message if outcome else "no build outcome"), None, 0.0
        binary = self._binaries.get(outcome.cache_key)
        if binary is None:
            raise RuntimeError(
                f"no cluster build of {outcome.cache_key}: builds and benchmarks must use one executor"
            )
        opts = backend.options
        job = jobs.BenchJob(
            kind=st.kernel.kind,
            target=backend.target,
            config=item.config,
            problem=st.problem,
            bench_args=dict(opts.bench_args),
            timeout_s=opts.run_timeout_s,
            cache_key=outcome.cache_key,
            kernel=st.kernel,
            gpu_env=self._gpu_env(),
        )
        key = "kp-bench-" + _digest(
            job.kind, job.target, item.key, sorted(st.problem.items()), job.bench_args, job.cache_key
        )
        return jobs.run_bench, (job, binary), key

    def measure(
        self, backend: Any, requests: list[MeasureRequest], stop: Callable[[], bool]
    ) -> Iterator[tuple[MeasureRequest, MeasureResult | None, float]]:
        from distributed import as_completed

        if not requests:
            return
        client = self.client
        window = max(1, 2 * self._gpu_slots(client))  # keeps every GPU fed, lets the budget stop us
        todo = list(requests)
        # requests by task key: two workloads on one problem may ask for the very same measurement
        # in one round; one task serves both (the loop records what each asked for, as locally)
        owner: dict[str, list[MeasureRequest]] = {}
        used = {
            r.outcome.cache_key: self._binaries.get(r.outcome.cache_key)
            for r in requests
            if r.outcome is not None
        }
        pending = as_completed()
        token = self.clock.start("bench")
        try:

            def feed() -> Iterator[tuple[MeasureRequest, MeasureResult | None, float]]:
                while todo and pending.count() < window:
                    req = todo.pop(0)
                    if stop():
                        yield req, None, 0.0
                        continue
                    job = self._job(backend, req)
                    if isinstance(job, tuple) and len(job) == 3 and callable(job[0]):
                        func, args, key = job
                        if key in owner:
                            owner[key].append(req)
                            continue
                        fut = client.submit(func, *args, key=key, resources={"GPU": 1}, retries=BENCH_RETRIES)
                        owner[key] = [req]
                        pending.add(fut)
                    else:
                        yield req, job, 0.0  # type: ignore[misc]

            yield from feed()
            while pending.count() or todo:
                if not pending.count():
                    yield from feed()
                    continue
                fut = next(pending)
                reqs = owner.pop(fut.key)
                try:
                    result, seconds, where = fut.result()
                    self.per_worker[where["worker"]] = self.per_worker.get(where["worker"], 0) + 1
                    self.worker_gpus[where["worker"]] = where["gpu"]
                except Exception as exc:  # noqa: BLE001 - worker lost too often, or the task itself failed
                    self.failures.append(f"{fut.key}: {type(exc).__name__}: {exc}")
                    result, seconds = (
                        ("crashed", f"cluster task failed: {type(exc).__name__}: {exc}"[:500], None, 0.0),
                        0.0,
                    )
                fut.release()
                for req in reqs:
                    yield req, result, seconds
                yield from feed()
        finally:
            self.clock.stop(token)
            for fut in list(pending.futures):
                fut.cancel()
            # let the cluster drop this round's programs (a later round re-reads them from the cache)
            for key, fut in used.items():
                if fut is not None and self._binaries.get(key) is fut:
                    del self._binaries[key]

    # ---- accounting / shutdown -------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        return {
            "executor": self.name,
            "cluster": self.address,
            "gpus": self.gpus,
            "vendor": self.vendor,
            "startup_s": round(self.startup_s, 3),
            "benchmarks_per_worker": dict(self.per_worker),
            "worker_gpus": dict(self.worker_gpus),
            "task_failures": list(self.failures),
            **self.clock.summary(),
        }

    def close(self) -> None:
        self._build_pool.shutdown(wait=True)
        self._binaries.clear()
        if self._owns_client and self._client is not None:
            self._client.close()
            self._client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
