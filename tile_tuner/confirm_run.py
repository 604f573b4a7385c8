"""Confirmation of a finished search on the tuning host: picks finalists, builds (cache hits) and runs
them through :func:`kernelpilot.tile_tuner.confirm.confirm`, and folds the result into ``run.json``.

Kept apart from :mod:`.confirm` (pure round logic) because this part knows the engine's states, the
backend's build cache and the kernel's command line.
"""

from __future__ import annotations

import time
from typing import Any

from kernelpilot.tile_tuner.baseline import VendorPlan, VendorPool, plan_for
from kernelpilot.tile_tuner.builder import BuildItem
from kernelpilot.tile_tuner.confirm import ConfirmOptions, Contender, confirm, not_possible, verdict
from kernelpilot.tile_tuner.runner import run_program
from kernelpilot.tile_tuner.space import config_key, config_label

REPLAY_REASON = (
    "not possible under --replay: the recorded store holds one median per config, so re-measuring would "
    "repeat the number the search used; the search-time winner is reported unconfirmed"
)
CLUSTER_REASON = (
    "not run with --cluster: confirmation needs the GPU of the tuning host, the benchmarks ran remotely"
)


def finalists_of(state: Any, n: int) -> list[Any]:
    """The ``n`` fastest verified configs of the search (``Tried``), plus the library default."""
    ok = sorted((t for t in state.tried if t.status == "ok" and t.time_ms), key=lambda t: t.time_ms)
    picked = ok[:n]
    default = next((t for t in ok if t.is_default), None)
    if n > 0 and default is not None and default not in picked:
        picked.append(default)
    return picked


def variants_for(kernel: Any, config: Any, problem: dict[str, Any], runtime: dict[str, Any] | None) -> list:
    """The run-time variant the search found best for ``config`` (all variants when it cannot be told)."""
    variants = list(kernel.runtime_variants(config, problem))
    if runtime:
        found = kernel.variant_from_runtime(runtime)
        if found is not None:
            return [found]
    for v in variants:
        if runtime and all(runtime.get(k) == val for k, val in v.items()):
            return [v]
    return variants


def program_run(kernel: Any, binary: Any, problem: dict[str, Any], variants: list, options: Any):
    """A fresh run of one built config restricted to ``variants``; the same command as the search."""

    def run() -> tuple[str, str, dict[str, Any] | None, float]:
        if kernel.runs_variants_in_one_process:
            runtime = {**options.bench_args, "variants": variants}
        else:
            runtime = {**options.bench_args, **(variants[0] if variants else {})}
        argv, env = kernel.run_command(binary, problem, runtime)
        out = run_program(argv, env, options.run_timeout_s)
        return out.status, out.message, out.raw or None, out.seconds

    return run


def _failed(status: str, reason: str):
    return lambda: (status, reason, None, 0.0)


def confirm_state(
    engine: Any, state: Any, options: ConfirmOptions, pool: VendorPool | None = None
) -> dict[str, Any]:
    """Confirmation record of one finished workload (see :func:`kernelpilot.tile_tuner.confirm.confirm`).

    ``pool``: the run's vendor workers (shared by every workload, so a serving worker starts once);
    without one, a pool for this workload alone is made and closed."""
    t0 = time.time()
    opts = engine.options
    if opts.replay:
        return {**not_possible(REPLAY_REASON, "not run under --replay (nothing is measured)"), "wall_s": 0.0}
    if opts.cluster:
        return {**not_possible(CLUSTER_REASON, "not run with --cluster"), "wall_s": 0.0}
    kernel, problem = engine.kernel, state.problem
    by_key = {config_key(o.config): o.config for o in state.history.observations}
    picked = finalists_of(state, options.finalists)
    items: list[tuple[Any, Any, BuildItem]] = []
    for t in picked:
        cfg = by_key.get(config_key(t.config))
        if cfg is None:  # never happens for configs of this run; kept as a reason, not a crash
            continue
        program = kernel.render(cfg, problem, engine.target)
        items.append((t, cfg, BuildItem.create(program, engine.backend.recipe, kernel.template_version,
                                               config_label(cfg))))  # fmt: skip
    outcomes = engine.backend.build([i for _, _, i in items]) if items else {}
    contenders: list[Contender] = []
    for t, cfg, item in items:
        outcome = outcomes.get(item.cache_key)
        binary = outcome.binary if outcome else engine.backend.cache.binary(item.cache_key)
        run = (
            program_run(kernel, binary, problem, variants_for(kernel, cfg, problem, t.runtime), opts)
            if binary is not None
            else _failed("build_failed", outcome.message if outcome else "no build outcome")
        )
        role = "default" if t.is_default else "finalist"
        contenders.append(Contender(label=t.label, role=role, run=run, search_ms=t.time_ms,
                                    config=t.config, runtime=t.runtime))  # fmt: skip
    if options.baseline:
        plan = plan_for(kernel, problem, engine.target, opts.bench_args)
    else:
        plan = VendorPlan(name="none", reason="--no-baseline")
    own = pool is None
    vendors = VendorPool(opts.run_timeout_s) if pool is None else pool
    try:
        doc = confirm(contenders, plan, lambda: vendors.measure(plan), options)
    finally:
        if own:
            vendors.close()
    doc["wall_s"] = round(time.time() - t0, 3)
    return doc


def apply(
    summary: dict[str, Any], conf: dict[str, Any], kernel: Any, problem: dict[str, Any]
) -> dict[str, Any]:
    """Fold a confirmation record into a workload's ``run.json`` entry.

    ``best`` becomes the confirmed winner (its ``time_ms`` the confirmed median) and ``search_best``
    keeps what the search reported; without a confirmation ``best`` stays and says ``confirmed: false``.
    ``vs_vendor`` is vendor time / winner time (> 1: the tuned kernel is faster)."""
    summary["confirmation"] = conf
    search = summary.get("best")
    summary["search_best"] = search
    winner = conf.get("winner")
    flops = kernel.flops(problem)
    if winner is not None:
        ms = winner["confirmed_ms"]
        tflops = flops / (ms * 1e-3) / 1e12
        peak = summary.get("peak_tflops")
        summary["best"] = {
            "config": winner.get("config"),
            "label": winner["label"],
            "runtime": winner.get("runtime"),
            "time_ms": ms,
            "tflops": tflops,
            "pct_of_peak": (100.0 * tflops / peak) if peak else None,
            "confirmed": True,
            "confirmed_ms": ms,
            "search_ms": winner.get("search_ms"),
            "spread": winner.get("spread"),
            "unstable": winner.get("unstable"),
        }
        default = next((r for r in conf["finalists"] if r["role"] == "default"), None)
        summary["speedup_vs_default_basis"] = "search"  # both sides search-time numbers
        if default is not None and default.get("confirmed_ms"):
            summary["speedup_vs_default"] = default["confirmed_ms"] / ms
            summary["speedup_vs_default_basis"] = "confirmed"
    elif search is not None:
        summary["best"] = {**search, "confirmed": False}
    vendor = conf.get("vendor")
    summary["vendor"] = vendor
    best = summary.get("best")
    v_ms = (vendor or {}).get("confirmed_ms")
    summary["vs_vendor"] = (v_ms / best["time_ms"]) if (v_ms and best and best.get("time_ms")) else None
    summary["verdict"] = verdict(best and {**best, "confirmed_ms": best["time_ms"]}, vendor,
                                 bool(winner))  # fmt: skip
    summary.setdefault("time_s", {})["confirm"] = conf.get("wall_s", 0.0)
    return summary
