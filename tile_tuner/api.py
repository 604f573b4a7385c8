"""Programmatic entry points of the tile tuner (the CLI, benchmarks and the Dask runner call these).

``resolve(...)``: target model, tile kernel and device for a target name.
``prepare_states(...)``: validates every workload (problem dims, legal space) before anything runs.
``run_batch(...)``: the whole tune (or a dry run), returning the run document that
:mod:`kernelpilot.tile_tuner.report` writes as JSON / CSV / tile_shapes / plots.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelpilot.errors import InputError
from kernelpilot.tile_tuner.baseline import VendorPool
from kernelpilot.tile_tuner.confirm_run import apply as apply_confirmation
from kernelpilot.tile_tuner.confirm_run import confirm_state
from kernelpilot.tile_tuner.engine import TuneEngine
from kernelpilot.tile_tuner.kernels import get_tile_kernel
from kernelpilot.tile_tuner.store import ResultsStore
from kernelpilot.tile_tuner.summary import summarize_state
from kernelpilot.tile_tuner.workload import TuneOptions, Workload

RUN_SCHEMA_VERSION = 2  # 2: best is the confirmed winner; search_best, confirmation, vendor


def resolve_device(target: str, user_device: str | None) -> Any:
    """Catalogue device: the user's choice, else the live GPU if it belongs to ``target``, else the
    target's default device.  A target the user set is never overridden by what is plugged in."""
    try:
        from kernelpilot.hw_models.catalogue import detect_device, get_device
    except ImportError:  # pragma: no cover - hw_models always ships
        return None
    if user_device:
        device = get_device(user_device)
        if getattr(device, "target", target) != target:
            from kernelpilot.hw_models.catalogue import load_catalogue

            same = sorted(k for k, d in load_catalogue().items() if getattr(d, "target", None) == target)
            raise InputError(
                f"device {user_device!r} is a {device.target} GPU, not a {target} one; devices of "
                f"target {target}: {', '.join(same) or 'none in the catalogue'}",
                field="--device",
            )
        return device
    try:
        live = detect_device(None)
    except Exception:  # noqa: BLE001 - probing must never break a run
        live = None
    if live is not None and getattr(live, "target", None) == target:
        return live
    try:
        return detect_device(user_target=target)
    except InputError:
        return None


@dataclass
class Group:
    target: str
    kernel_kind: str
    model: Any
    kernel: Any
    workloads: list[Workload]


def plan_groups(target: str, workloads: list[Workload]) -> list[Group]:
    from kernelpilot.targets import get_target_model

    model = get_target_model(target)
    groups: dict[str, Group] = {}
    for w in workloads:
        if w.kernel not in groups:
            groups[w.kernel] = Group(target, w.kernel, model, get_tile_kernel(w.kernel, target), [])
        groups[w.kernel].workloads.append(w)
    return list(groups.values())


def run_batch(
    target: str,
    workloads: list[Workload],
    options: TuneOptions,
    *,
    dry_run: bool = False,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    proposer_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Tune (or plan) every workload; returns the run document."""
    started = time.time()
    options.confirm.validate()
    device = resolve_device(target, options.device)
    groups = plan_groups(target, workloads)
    if dry_run:
        from kernelpilot.tile_tuner.plan import dry_run as do_dry_run

        return do_dry_run(groups, options, device)
    # bad input must fail before anything is written (store, cache, output folder)
    from kernelpilot.tile_tuner.proposers import make_proposer
    from kernelpilot.tile_tuner.space import SearchSpace

    spaces: list[list[SearchSpace]] = []  # per group, per workload: handed to the engines below
    for g in groups:
        spaces.append([])
        for w in g.workloads:
            problem = g.kernel.validate_problem(w.dims, w.dtype, w.source or w.name)
            space = SearchSpace.for_workload(g.model, w, problem, device, options.streamk_twins)
            spaces[-1].append(space)
            if len(space) == 0:  # SearchSpace refuses a filter that keeps nothing, naming the legal values
                raise InputError(
                    f"{w.source or w.name}: the {target} hardware model finds no legal {w.kernel} config "
                    f"for these dims ({w.dims})",
                    field="dims",
                )
            if w.proposer not in ("llm", "hybrid"):
                make_proposer(w.proposer, space, w.seed, device=device, **w.proposer_options)
    from kernelpilot.tile_tuner.scaleout import make_executor

    executor = make_executor(options, groups)  # in-process, --gpus pool or --cluster (Dask); validates flags
    store: ResultsStore | None = None
    engines: list[tuple[Group, TuneEngine, list[Any]]] = []
    results: list[dict[str, Any]] = []
    backend_info: dict[str, Any] = {}
    confirm_s = 0.0
    try:
        # validate everything (dims, spaces, proposers, toolchain) before the first build
        for g, group_spaces in zip(groups, spaces, strict=True):
            engine = TuneEngine(
                g.model, g.kernel, target, options, None, device=device, on_event=on_event,
                proposer_options=proposer_options, executor=executor,
            )  # fmt: skip
            states = [engine.make_state(w, s) for w, s in zip(g.workloads, group_spaces, strict=True)]
            engines.append((g, engine, states))
        # The store is opened only now: a batch that fails validation (bad input, missing compiler or
        # headers) writes nothing, not even an empty results database.
        store = ResultsStore(options.store_path)
        for _, engine, _ in engines:
            engine.store = store
        for g, engine, states in engines:
            engine.run(g.workloads, states)
            t_confirm = time.time()
            confirmations = []
            vendors = VendorPool(options.run_timeout_s)  # one serving baseline worker for the group
            try:
                for s in states:
                    if on_event is not None:
                        on_event("confirm", {"workload": s.workload.name})
                    confirmations.append(confirm_state(engine, s, options.confirm, vendors))
            finally:
                vendors.close()
            confirm_s += time.time() - t_confirm
            backend_info = {
                "backend": engine.backend.name,
                "device_name": engine.backend.device_name,
                "toolchain": engine.backend.toolchain,
                "library": engine.backend.library,
                "template_version": g.kernel.template_version,
                "run_id": engine.run_id,
            }
            results += [
                apply_confirmation(summarize_state(s, target, device, g.kernel), c, g.kernel, s.problem)
                for s, c in zip(states, confirmations, strict=True)
            ]
    finally:
        executor.close()
        if store is not None:
            store.close()
    return {
        "schema_version": RUN_SCHEMA_VERSION,
        "command": options.command,
        "target": target,
        "device": getattr(device, "name", None),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "wall_s": round(time.time() - started, 2),
        "store": str(options.store_path),
        "replay": str(options.replay) if options.replay else None,
        **backend_info,
        "executor": executor.describe(),
        "confirm": {
            "finalists": options.confirm.finalists,
            "rounds": options.confirm.rounds,
            "extra_rounds_if_unstable": options.confirm.extra,
            "baseline": options.confirm.baseline,
            "unstable_spread": options.confirm.unstable_spread,
            "wall_s": round(confirm_s, 2),
        },
        "workloads": results,
    }
