"""The tuning loop: propose -> check -> build (CMake + ninja, cached) -> benchmark -> feed back.

Workloads that share a target and kernel kind are tuned together in *rounds*: every active workload's
proposer proposes a batch, the union of their programs is built in one ninja project (a binary serves
every shape, so configs shared by several workloads are built once), then each workload's configs are
benchmarked serially on the GPU.  For speculative proposers (exhaustive, random) the next round is
built while the current one is benchmarked.  The library default config of each workload is always
measured first.  Each measurement is committed to the results store at once, so a killed run resumes
where it stopped; configs already in the store are not measured again unless ``remeasure``.

This module is only the loop.  Its data types are in :mod:`.workload`, the backends (real builds and
runs, or replay from a recorded store) in :mod:`.backends`, worker-side measurement in :mod:`.measure`,
the run summary in :mod:`.summary`; dry runs are in :mod:`kernelpilot.tile_tuner.plan`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from kernelpilot.tile_tuner.backends import LocalBackend, ReplayBackend
from kernelpilot.tile_tuner.builder import BuildItem, BuildOutcome, default_jobs
from kernelpilot.tile_tuner.claims import MeasureClaims
from kernelpilot.tile_tuner.kernel_api import INVALID_TIMING, implausible, is_plausible_time
from kernelpilot.tile_tuner.proposers import Observation, make_proposer
from kernelpilot.tile_tuner.scaleout.base import InProcessExecutor, MeasureRequest
from kernelpilot.tile_tuner.space import SearchSpace, config_key, config_label
from kernelpilot.tile_tuner.store import Measurement, MeasurementKey, ResultsStore, problem_key
from kernelpilot.tile_tuner.workload import (
    Round,
    RoundItem,
    Tried,
    TuneOptions,
    Workload,
    WorkloadState,
)


class TuneEngine:
    """Tunes a group of workloads that share target and kernel kind."""

    def __init__(
        self,
        target_model: Any,
        kernel: Any,
        target: str,
        options: TuneOptions,
        store: ResultsStore | None,
        *,
        device: Any = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        proposer_options: dict[str, Any] | None = None,
        executor: Any = None,
    ) -> None:
        self.model = target_model
        self.kernel = kernel
        self.target = target
        self.options = options
        self.store = store
        self.device = device
        self.on_event = on_event or (lambda kind, data: None)
        self.proposer_options = proposer_options or {}
        self.backend: Any = (ReplayBackend if options.replay else LocalBackend)(
            kernel, target, options, target_model
        )
        # where rounds are built and benchmarked (in-process, a GPU pool, Dask): see tile_tuner.scaleout
        self.executor: Any = executor if executor is not None else InProcessExecutor()
        self._owns_executor = executor is None
        self.run_id = uuid.uuid4().hex[:12]
        self.deadline = time.time() + options.budget_minutes * 60 if options.budget_minutes else None
        self.backend.deadline = self.deadline
        self.started = time.time()

    @property
    def results(self) -> ResultsStore:
        """The results store: ``run_batch`` builds engines without one to validate every workload before
        anything is written, and hands it over before the first round."""
        if self.store is None:
            raise RuntimeError("the tuning engine has no results store yet")
        return self.store

    # ---- setup ------------------------------------------------------------------------------
    def make_state(self, w: Workload, space: SearchSpace | None = None) -> WorkloadState:
        """``space``: the workload's space when the caller already built it (the batch's pre-run
        validation does), so its legal configs are not enumerated twice."""
        if space is None:
            problem = self.kernel.validate_problem(w.dims, w.dtype, w.source or w.name)
            space = SearchSpace.for_workload(self.model, w, problem, self.device, self.options.streamk_twins)
        problem = space.problem
        options = {**self.proposer_options, **w.proposer_options}  # the workload's win
        proposer = make_proposer(w.proposer, space, w.seed, device=self.device, **options)
        state = WorkloadState(workload=w, problem=problem, space=space, proposer=proposer, kernel=self.kernel)
        default = space.default()
        state.default_cfg = default
        state.default_key = config_key(default)
        return state

    # ---- helpers ----------------------------------------------------------------------------
    def _key(self, state: WorkloadState, cfg_key: str) -> MeasurementKey:
        return MeasurementKey(
            target=self.target,
            device=self.backend.device_name,
            toolchain=self.backend.toolchain,
            library=self.backend.library,
            template_version=self.kernel.template_version
            + (f"/{self.kernel.variants_version}" if self.kernel.variants_version else ""),
            kernel=state.workload.kernel,
            dtype=state.problem["dtype"],
            layout=str(state.problem.get("layout", "")),
            problem=problem_key(state.problem),
            config_key=cfg_key,
        )

    def _out_of_time(self) -> bool:
        return self.deadline is not None and time.time() >= self.deadline

    def _active(self, states: list[WorkloadState]) -> list[WorkloadState]:
        for s in states:
            if s.done:
                continue
            if s.measured + len(s.history.pending) >= s.workload.budget_configs:
                if not s.history.pending:
                    s.done, s.stop_reason = True, f"budget of {s.workload.budget_configs} configs reached"
                continue
        return [s for s in states if not s.done]

    def _converged(self, s: WorkloadState) -> bool:
        p = s.workload.patience
        if not p or len(s.best_trace) <= p:
            return False
        before, now = s.best_trace[-p - 1], s.best_trace[-1]
        return before is not None and now is not None and now > before * 0.995

    # ---- rounds -----------------------------------------------------------------------------
    def _start_round(self, states: list[WorkloadState]) -> Round | None:
        if self._out_of_time():
            for s in states:
                if not s.done:
                    s.done, s.stop_reason = True, "time budget reached"
            return None
        items: list[RoundItem] = []
        for s in self._active(states):
            room = s.workload.budget_configs - s.measured - len(s.history.pending)
            if room <= 0:
                continue
            t0 = time.time()
            configs: list[Any] = []
            if not s.tried and s.default_key not in s.history.pending:
                configs.append(s.default_cfg)  # the library default is always measured first
                s.history.pending.add(s.default_key)
                room -= 1
            n = min(room, self.options.batch_size or s.workload.batch_size or self._default_batch())
            if n > 0:
                configs += s.proposer.propose(n, s.history)
            s.propose_s += time.time() - t0
            if not configs and not s.history.pending:
                s.done, s.stop_reason = True, "proposer has nothing left to propose"
                continue
            for cfg in configs:
                key = config_key(cfg)
                s.history.pending.add(key)
                item = RoundItem(state=s, config=cfg, key=key, build=None)
                if not self.options.remeasure and not self.options.replay:
                    item.stored = self.results.lookup(self._key(s, key))
                if item.stored is None and not self.options.replay:
                    program = self.kernel.render(cfg, s.problem, self.target)
                    item.build = BuildItem.create(
                        program, self.backend.recipe, self.kernel.template_version, config_label(cfg)
                    )
                items.append(item)
        if not items:
            return None
        rnd = Round(items=items)
        builds = [i.build for i in items if i.build is not None]
        self.on_event("round", {"configs": len(items), "builds": len({b.cache_key for b in builds})})
        rnd.future = self.executor.submit_build(self.backend, builds) if builds else None
        return rnd

    def _default_batch(self) -> int:
        jobs = self.options.jobs
        if jobs is None:
            recipe = getattr(self.backend, "recipe", None)
            jobs = default_jobs(recipe.memory_gb_per_job) if recipe else 8
        return max(4, jobs)

    def _finish_round(self, rnd: Round) -> None:
        t0 = time.time()
        outcomes: dict[str, BuildOutcome] = rnd.future.result() if rnd.future else {}
        build_wait = time.time() - t0
        per_state: dict[int, int] = {}
        for item in rnd.items:
            per_state[id(item.state)] = per_state.get(id(item.state), 0) + 1
        # benchmark through the executor (serially here, in parallel on a GPU pool or a cluster);
        # each result is recorded the moment it arrives (under its key lock: see tile_tuner.claims)
        # and fed back below in round order, so proposers see the same history on any executor
        requests = [
            MeasureRequest(i, item, outcomes.get(item.build.cache_key) if item.build else None)
            for i, item in enumerate(rnd.items)
            if item.stored is None
        ]
        results: dict[int, Any] = {}

        def measure(reqs: list[MeasureRequest]) -> None:
            for req, res, seconds in self.executor.measure(self.backend, reqs, self._out_of_time):
                req.item.state.bench_s += seconds
                if res is not None and res[0] != "not_recorded":
                    status, reason, raw, run_s = res
                    m = self._to_measurement(req.item, status, reason, raw, run_s, req.outcome)
                    self.results.record(m)
                    res = m
                results[req.index] = res

        if self.options.replay:
            measure(requests)
        else:  # processes sharing the store measure each config once (tile_tuner.claims)
            claims = MeasureClaims(self.results.path)
            key_of = lambda r: self._key(r.item.state, r.item.key).digest()  # noqa: E731
            lookup = self._fresh_lookup
            try:
                mine, theirs, found = claims.split(requests, key_of, lookup)
                measure(mine)
                more, found_later = claims.wait(theirs, key_of, lookup, self.deadline)
                measure(more)
            finally:
                claims.release()
            for index, stored in {**found, **found_later}.items():
                rnd.items[index].stored = stored
        for i, item in enumerate(rnd.items):
            s = item.state
            s.build_s += build_wait / max(1, len(per_state)) / per_state[id(s)]
            if item.stored is not None:
                self._observe(item, item.stored, source="store")
                continue
            res = results.get(i)
            if res is None:  # not started: the time budget ran out
                s.history.pending.discard(item.key)
                s.done, s.stop_reason = True, "time budget reached"
                continue
            if not isinstance(res, Measurement):  # not_recorded (replay)
                s.history.pending.discard(item.key)
                s.history.observations.append(Observation(item.key, item.config, None, res[0]))
                continue
            self._observe(item, res, source="replay" if self.options.replay else "measured")

    def _fresh_lookup(self, req: MeasureRequest) -> Measurement | None:
        """A stored result another process recorded; with ``remeasure`` only one from after this
        run started (older rows are what the user asked to measure again)."""
        m = self.results.lookup(self._key(req.item.state, req.item.key))
        if m is not None and self.options.remeasure and m.created < self.started:
            return None
        return m

    def _to_measurement(
        self,
        item: RoundItem,
        status: str,
        reason: str,
        raw: dict[str, Any] | None,
        run_s: float,
        outcome: BuildOutcome | None,
    ) -> Measurement:
        s = item.state
        time_ms = tmin = tmax = tflops = None
        runtime = None
        bad = implausible(raw or {}) if status == "ok" else None
        if bad is not None:
            status, reason = bad
        elif raw and status == "ok":
            time_ms = raw["time_ms"]["median"]
            tmin, tmax = raw["time_ms"].get("min"), raw["time_ms"].get("max")
            tflops = self.kernel.flops(s.problem) / (time_ms * 1e-3) / 1e12
            runtime = raw.get("runtime")
            peak = self._peak(s.problem["dtype"])
            if peak and tflops > peak * 1.02:
                status = "above_peak"
                reason = f"{tflops:.1f} TFLOP/s is above the device peak {peak:.1f}: measurement error"
        return Measurement(
            key=self._key(s, item.key),
            status=status,
            reason=reason,
            time_ms=time_ms,
            time_min_ms=tmin,
            time_max_ms=tmax,
            tflops=tflops,
            runtime=runtime,
            result=raw,
            build_s=outcome.seconds if outcome else 0.0,
            run_s=run_s,
            run_id=self.run_id,
        )

    def _peak(self, dtype: Any) -> float | None:
        """The device's peak for the problem's own input types (an int8 GEMM is held to the int8 rate,
        not the bf16 one), the same peak summarize_state reports against."""
        dev = self.device
        if dev is None:
            return None
        try:
            return float(dev.peak(dtype))
        except Exception:  # noqa: BLE001
            return None

    def _observe(self, item: RoundItem, m: Measurement, source: str) -> None:
        s = item.state
        s.history.pending.discard(item.key)
        status, reason = m.status, m.reason
        if status == "ok" and not is_plausible_time(m.time_ms):  # e.g. a row stored before this check
            status, reason = INVALID_TIMING, f"stored time {m.time_ms!r} ms is not a finite time > 0"
        ok = status == "ok"
        s.history.observations.append(Observation(item.key, item.config, m.time_ms if ok else None, status))
        variants = list((m.result or {}).get("variants") or [])
        t = Tried(
            config=item.config.as_dict() if hasattr(item.config, "as_dict") else dict(item.config),
            label=config_label(item.config),
            status=status,
            reason=reason,
            time_ms=m.time_ms if ok else None,
            tflops=m.tflops if ok else None,
            runtime=m.runtime,
            source=source,
            is_default=item.key == s.default_key,
            order=len(s.tried),
            build_s=m.build_s,
            run_s=m.run_s,
            variants=variants,
        )
        s.tried.append(t)
        best = s.best()
        s.best_trace.append(best.time_ms if best else None)
        self.on_event("measured", {"workload": s.workload.name, "tried": t})
        if self._converged(s):
            s.done, s.stop_reason = True, f"converged (no gain over the last {s.workload.patience} configs)"

    # ---- main -------------------------------------------------------------------------------
    def run(
        self, workloads: list[Workload], states: list[WorkloadState] | None = None
    ) -> list[WorkloadState]:
        states = states or [self.make_state(w) for w in workloads]
        self.results.record_run(
            self.run_id,
            self.options.command,
            {"target": self.target, "workloads": [w.name for w in workloads]},
        )
        speculative = all(getattr(s.proposer, "speculative", False) for s in states)
        try:
            inflight = self._start_round(states)
            while inflight is not None:
                nxt = self._start_round(states) if speculative else None
                self._finish_round(inflight)
                inflight = nxt if nxt is not None else self._start_round(states)
        finally:
            if self._owns_executor:
                self.executor.close()
        for s in states:
            if not s.done:
                s.done = True
                s.stop_reason = s.stop_reason or "finished"
        return states
