"""Small verified steps for agents and people: analyze, validate, benchmark, profile, trial.

``benchmark`` and ``trial add`` ALWAYS check correctness against the oracle before a time is shown
or stored (Xe-Forge's ``--baseline-us`` path printed "PASSED" without comparing).  Exit codes: 0 ok,
1 runtime failure, 2 bad input, 4 the candidate is not correct (wrong result, crash, timeout, invalid).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

EXIT_NOT_CORRECT = 4


def _kernel_args(parser: argparse.ArgumentParser, *, spec_required: bool = True) -> None:
    parser.add_argument("-s", "--spec", required=spec_required, type=Path, help="spec YAML")
    parser.add_argument("--variant", help="spec variant")
    parser.add_argument("--device", choices=("cuda", "xpu", "cpu"), help="default: cuda > xpu > cpu")
    parser.add_argument("--dsl", help="DSL plugin (default: detected)")
    parser.add_argument("--rtol", type=float, help="relative tolerance (CLI > spec > env > 1e-2)")
    parser.add_argument("--atol", type=float, help="absolute tolerance (CLI > spec > env > 1e-5)")
    parser.add_argument("--seed", type=int, default=20240601, help="seed of the random inputs")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _tree_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trials-dir", type=Path, help="trial trees folder (TRIALS_DIR, default trials)")
    parser.add_argument("--name", help="tree name (default: the only tree in --trials-dir)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="skill", metavar="SKILL", required=True)

    p = sub.add_parser("analyze", help="static analysis: issues with category and stage")
    p.add_argument("file", type=Path)
    p.add_argument("--dsl", help="DSL (default: detected)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("validate", help="static checks of a kernel file (the DSL's own language)")
    p.add_argument("file", type=Path)
    p.add_argument("--dsl", help="DSL (default: detected)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("benchmark", help="check a candidate against the oracle and time it vs the baseline")
    p.add_argument(
        "baseline", type=Path, help="the original kernel (its _pytorch.py reference is the oracle)"
    )
    p.add_argument("candidate", type=Path, nargs="?", help="optimized kernel (default: baseline only)")
    _kernel_args(p)

    p = sub.add_parser(
        "profile", help="repeated timings, spread, FLOP/s, bandwidth, roofline class; hardware counters"
    )
    p.add_argument("file", type=Path)
    p.add_argument("--repeats", type=int, default=5, help="independent timed runs")
    p.add_argument(
        "--profiler",
        choices=("none", "ncu", "vtune"),
        default="none",
        help="also collect hardware counters: ncu (Nsight Compute, NVIDIA) or vtune (Intel)",
    )
    p.add_argument("--warmup", type=int, help="launches before collection (default VTUNE_WARMUP)")
    p.add_argument("--iters", type=int, help="collected launches (default VTUNE_ITERS for vtune, 1 for ncu)")
    p.add_argument("--vtune-bin", help="VTune binary (VTUNE_BIN)")
    p.add_argument(
        "--original",
        type=Path,
        help="the original kernel whose oracle applies (its _pytorch.py reference, else itself); default FILE",
    )
    _kernel_args(p)

    trial = sub.add_parser("trial", help="the persisted trial tree").add_subparsers(
        dest="trial_cmd", metavar="ACTION", required=True
    )
    p = trial.add_parser("init", help="create the tree for a kernel and measure the baseline (t0)")
    p.add_argument("file", type=Path)
    p.add_argument("--fresh", action="store_true", help="move an existing tree of this name aside")
    _kernel_args(p)
    p.add_argument("--trials-dir", type=Path)
    p.add_argument("--name")
    p = trial.add_parser("add", help="check, time and record a candidate as a child of --parent")
    p.add_argument("file", type=Path)
    p.add_argument("--parent", required=True, help="parent trial id, e.g. t0")
    p.add_argument("--stage", default="discovery", help="stage this candidate belongs to")
    p.add_argument("--seed", type=int, help="input seed (default: derived from the trial number)")
    _tree_args(p)
    p = trial.add_parser(
        "save", help="deprecated Xe-Forge form of `trial add`: save NAME FILE --strategy TEXT"
    )
    p.add_argument("kernel_name", help="the tree name (--name of trial add)")
    p.add_argument("file", type=Path)
    p.add_argument("--parent", required=True, help="parent trial id, e.g. t0")
    p.add_argument("--strategy", default="", help="a stage name, else free text kept with the trial")
    p.add_argument("--trials-dir", type=Path)
    p.add_argument("--json", action="store_true")
    p = trial.add_parser("status", help="show the tree")
    _tree_args(p)
    p = trial.add_parser("best", help="the fastest correct trial")
    _tree_args(p)
    p = trial.add_parser("show", help="one trial: verdict, full message, times, its code file")
    p.add_argument("node", help="trial id, e.g. t3")
    _tree_args(p)
    p = trial.add_parser("finalize", help="copy the best (or --node) correct trial to -o")
    p.add_argument("-o", "--output", type=Path, required=True)
    p.add_argument("--node", help="trial id (default: the best)")
    _tree_args(p)


# --------------------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    handler = {
        "analyze": _analyze,
        "validate": _validate,
        "benchmark": _benchmark,
        "profile": _profile,
        "trial": _trial,
    }[args.skill]
    return handler(args)


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, indent=2, default=str) if getattr(args, "json", False) else text)


def _tolerance_cli(args: argparse.Namespace) -> dict[str, Any]:
    return {"correctness_rtol": getattr(args, "rtol", None), "correctness_atol": getattr(args, "atol", None)}


def _detect_dsl_only(path: Path, dsl: str | None) -> tuple[str, Any]:
    """``--dsl`` (checked) or the DSL that claims the file; no executor is built."""
    from kernelpilot.errors import InputError
    from kernelpilot.fileio import read_text
    from kernelpilot.pipeline.setup import claimed_dsl, known_dsls
    from kernelpilot.plugins import get_registry
    from kernelpilot.settings import load_settings

    read_text(path, what="kernel file")
    load_settings()  # a broken .env is reported here too, never ignored
    registry = get_registry()
    if dsl:
        if dsl not in known_dsls(registry):
            raise InputError(
                f"unknown dsl {dsl!r}; installed: {', '.join(known_dsls(registry))}", field="--dsl"
            )
        return dsl, registry
    return claimed_dsl(registry, path), registry


def _analyze(args: argparse.Namespace) -> int:
    from kernelpilot.pipeline.static_analysis import static_issues

    dsl, registry = _detect_dsl_only(args.file, args.dsl)
    issues = static_issues(args.file.read_text(encoding="utf-8"), dsl, registry.collect("kp_analyzers"))
    lines = [f"{args.file} ({dsl}): {len(issues)} issue(s)"]
    for issue in issues:
        where = f"line {issue.line}" if issue.line else "file"
        lines.append(
            f"  [{issue.severity}] {issue.category} -> stage {issue.stage} ({where}): {issue.message}"
        )
    _emit(
        args, {"file": str(args.file), "dsl": dsl, "issues": [i.as_dict() for i in issues]}, "\n".join(lines)
    )
    return 0


def _validate(args: argparse.Namespace) -> int:
    from kernelpilot.pipeline.setup import executor_for
    from kernelpilot.settings import load_settings

    dsl, registry = _detect_dsl_only(args.file, args.dsl)
    executor = executor_for(registry, dsl, "cpu", load_settings())
    try:
        problems = executor.validate(args.file.read_text(encoding="utf-8"))
    finally:
        executor.close()
    text = f"{args.file} ({dsl}): " + ("OK" if not problems else "\n  " + "\n  ".join(problems))
    _emit(args, {"file": str(args.file), "dsl": dsl, "problems": problems}, text)
    return 1 if problems else 0


def _eval_dict(ev: Any) -> dict[str, Any]:
    timing = ev.timing
    return {
        "verdict": ev.verdict,
        "message": ev.message,
        "median_ms": timing.median_ms if timing else None,
        "min_ms": timing.min_ms if timing else None,
        "max_ms": timing.max_ms if timing else None,
        "interpreter": bool(timing and timing.interpreter),
        "max_abs_error": ev.max_abs_error,
        "max_rel_error": ev.max_rel_error,
        "tflops": ev.tflops,
        "gbps": ev.gbps,
        "extra": {
            k: v for k, v in (ev.extra or {}).items() if isinstance(v, str | int | float | bool) or v is None
        },
    }


def _describe(label: str, data: dict[str, Any]) -> str:
    text = f"{label}: correctness {'PASSED' if data['verdict'] == 'correct' else 'FAILED (' + data['verdict'] + ')'}"
    if data["median_ms"] is not None:
        text += f"; median {data['median_ms']:.4g} ms (min {data['min_ms']:.4g}, max {data['max_ms']:.4g})"
        if data["interpreter"]:
            text += " [interpreter: not a performance number]"
    if data["max_abs_error"] is not None:
        text += f"; max abs err {data['max_abs_error']:.3g}"
    if data["verdict"] != "correct" and data["message"]:
        text += f"\n  {data['message'][:2000]}"
    return text


def _benchmark(args: argparse.Namespace) -> int:
    from kernelpilot.pipeline.session import open_session

    session = open_session(
        args.baseline,
        args.spec,
        variant=args.variant,
        device=args.device,
        dsl=args.dsl,
        cli_settings=_tolerance_cli(args),
    )
    baseline_source = args.baseline.read_text(encoding="utf-8")
    try:
        pair = None
        if args.candidate is not None:
            # both checked on the same inputs, timed interleaved in one process: a side-by-side ratio
            # (None when the executor cannot time side by side)
            candidate_text = args.candidate.read_text(encoding="utf-8")
            pair = session.executor.evaluate_side_by_side([baseline_source, candidate_text], seed=args.seed)
        if pair is not None:
            base, cand = _eval_dict(pair[0]), _eval_dict(pair[1])
        else:
            base = _eval_dict(session.executor.evaluate(baseline_source, seed=args.seed))
            cand = None
            if args.candidate is not None:
                candidate_source = args.candidate.read_text(encoding="utf-8")
                cand = _eval_dict(session.executor.evaluate(candidate_source, seed=args.seed + 1))
        result: dict[str, Any] = {
            "oracle": session.executor.oracle_kind,
            "variant": session.variant,
            "device": session.device,
            "rtol": session.settings.correctness_rtol,
            "atol": session.settings.correctness_atol,
            "side_by_side": pair is not None,
            "baseline": base,
        }
        lines = [_describe(f"baseline {args.baseline}", base)]
        exit_code = 0 if base["verdict"] == "correct" else EXIT_NOT_CORRECT
        if cand is not None:
            result["candidate"] = cand
            lines.append(_describe(f"candidate {args.candidate}", cand))
            both = base["verdict"] == cand["verdict"] == "correct"
            if both and base["median_ms"] and cand["median_ms"]:
                result["speedup"] = base["median_ms"] / cand["median_ms"]
                how = "side by side" if result["side_by_side"] else "measured one after the other"
                note = ", interpreter timings: not a performance number" if cand["interpreter"] else ""
                lines.append(f"speedup {result['speedup']:.3f}x ({how}{note})")
            else:
                result["speedup"] = None
                lines.append("speedup: none (only correct kernels are compared)")
            exit_code = 0 if cand["verdict"] == "correct" else EXIT_NOT_CORRECT
    finally:
        session.executor.close()
    _emit(args, result, "\n".join(lines))
    return exit_code


def _profile(args: argparse.Namespace) -> int:
    import statistics

    from kernelpilot.pipeline.session import open_session

    session = open_session(
        args.original or args.file,
        args.spec,
        variant=args.variant,
        device=args.device,
        dsl=args.dsl,
        cli_settings={**_tolerance_cli(args), "vtune_bin": getattr(args, "vtune_bin", None)},
    )
    source = args.file.read_text(encoding="utf-8")
    runs = []
    report = None
    try:
        if args.profiler != "none":
            from kernelpilot.profiling.collect import check_tool

            check_tool(args.profiler, session.device, session.settings)  # before minutes of timing
        for i in range(max(1, args.repeats)):
            ev = _eval_dict(session.executor.evaluate(source, seed=args.seed + i))
            runs.append(ev)
            if ev["verdict"] != "correct":
                break
        if args.profiler != "none" and runs[0]["verdict"] == "correct":
            from kernelpilot.profiling.collect import profile

            report = profile(
                source,
                original_path=Path(args.original or args.file),
                variant=session.spec.variant(session.variant),
                device=session.device,
                tool=args.profiler,
                settings=session.settings,
                warmup=args.warmup,
                iters=args.iters,
                suffix=args.file.suffix or ".py",
            )
    finally:
        session.executor.close()
    medians = [r["median_ms"] for r in runs if r["median_ms"] is not None]
    summary: dict[str, Any] = {"file": str(args.file), "device": session.device, "runs": runs}
    lines = [_describe(f"{args.file}", runs[0])]
    if medians:
        center = statistics.median(medians)
        summary.update(
            median_ms=center,
            spread=(max(medians) - min(medians)) / center if center else None,
            tflops=runs[0]["tflops"],
            gbps=runs[0]["gbps"],
        )
        lines.append(
            f"{len(medians)} runs: median of medians {center:.4g} ms, spread {summary['spread']:.1%}"
            + (" [interpreter]" if runs[0]["interpreter"] else "")
        )
        extra = runs[0]["extra"]
        for key in ("tflops", "gbps"):
            if runs[0][key] is not None:
                lines.append(f"{key}: {runs[0][key]:.4g}")
        for key in ("arithmetic_intensity", "bound", "peak_tflops", "mem_bandwidth_gbs", "device_name"):
            if extra.get(key) is not None:
                lines.append(f"{key}: {extra[key]}")
    if report is not None:
        summary["counters"] = report.as_dict()
        lines.append("")
        lines.append(report.summary())
    _emit(args, summary, "\n".join(lines))
    return 0 if runs[0]["verdict"] == "correct" else EXIT_NOT_CORRECT


# -------------------------------------------------------------------------------------------- trial
def _trials_root(args: argparse.Namespace) -> Path:
    if getattr(args, "trials_dir", None):
        return Path(args.trials_dir)
    from kernelpilot.settings import load_settings

    return Path(load_settings().trials_dir)


def _tree_dir(args: argparse.Namespace) -> Path:
    from kernelpilot.errors import InputError
    from kernelpilot.trials.store import TrialStore

    root = _trials_root(args)
    if args.name:
        return root / args.name
    trees = sorted(p.parent for p in root.glob(f"*/{TrialStore.DB_NAME}"))
    if len(trees) == 1:
        return trees[0]
    raise InputError(
        f"{len(trees)} trial trees in {root} ({', '.join(t.name for t in trees) or 'none'}); pass --name",
        file=str(root),
        field="--name",
    )


def _trial(args: argparse.Namespace) -> int:
    from kernelpilot.trials.store import TrialStore

    if args.trial_cmd == "init":
        return _trial_init(args)
    if args.trial_cmd == "save":
        _save_as_add(args)
    store = TrialStore.open_existing(_tree_dir(args))
    try:
        if args.trial_cmd in ("add", "save"):
            return _trial_add(args, store)
        if args.trial_cmd == "status":
            nodes = [n.as_dict() for n in store.nodes()]
            _emit(args, {"tree": str(store.dir), "meta": store.meta(), "nodes": nodes}, store.render())
            return 0
        if args.trial_cmd == "show":
            node = store.get(args.node)
            if node is None:
                from kernelpilot.errors import InputError

                known = ", ".join(n.id for n in store.nodes()) or "(none)"
                raise InputError(f"no trial {args.node!r} in {store.dir} (trials: {known})", field="node")
            text = _node_line(node).split("\n")[0] + f"\nfile: {store.dir / node.code_file}"
            if node.message:
                text += f"\nmessage:\n{node.message}"
            if node.extra:
                text += f"\nextra: {json.dumps(node.extra, default=str)}"
            _emit(args, {**node.as_dict(), "file": str(store.dir / node.code_file)}, text)
            return 0
        if args.trial_cmd == "best":
            best = store.best()
            if best is None:
                _emit(args, {"best": None}, "no correct, timed trial yet")
                return 1
            text = f"best: {best.id} ({best.stage}) {best.median_ms:.4g} ms, {best.speedup or 0:.3f}x vs t0"
            text += " [interpreter timings]" if best.interpreter else ""
            _emit(args, {"best": best.as_dict(), "file": str(store.dir / best.code_file)}, text)
            return 0
        from kernelpilot.fileio import check_output_file

        check_output_file(args.output, field="-o")
        node = store.finalize(args.output, args.node)
        _emit(
            args,
            {"finalized": node.as_dict(), "output": str(args.output)},
            f"wrote {args.output} from {node.id}",
        )
        return 0
    finally:
        store.close()


def _trial_init(args: argparse.Namespace) -> int:
    from kernelpilot.pipeline.session import open_session
    from kernelpilot.trials.store import TreeIdentity, TrialStore, sha256_text, tolerance_key

    session = open_session(
        args.file,
        args.spec,
        variant=args.variant,
        device=args.device,
        dsl=args.dsl,
        cli_settings=_tolerance_cli(args),
    )
    source = args.file.read_text(encoding="utf-8")
    identity = TreeIdentity(
        kernel_sha=sha256_text(source),
        spec_sha=sha256_text(args.spec.read_text(encoding="utf-8")),
        variant=session.variant,
        dsl=session.dsl,
        device=session.device,
        kernel_path=str(args.file.resolve()),
        tolerances=tolerance_key(session.settings.correctness_rtol, session.settings.correctness_atol),
    )
    root = args.trials_dir or Path(session.settings.trials_dir)
    store = TrialStore.open(
        root, args.name or args.file.stem, identity, fresh=args.fresh, extension=args.file.suffix
    )
    try:
        for key, value in {
            "spec_path": str(args.spec.resolve()),
            "rtol": str(session.settings.correctness_rtol),
            "atol": str(session.settings.correctness_atol),
            "max_agent_trials": str(session.settings.max_trials),
        }.items():
            store.set_meta(key, value)
        t0 = store.get("t0")
        if t0 is not None and t0.status == "evaluated":
            _emit(
                args,
                {"tree": str(store.dir), "baseline": t0.as_dict()},
                f"tree {store.dir} exists; t0 {t0.verdict}",
            )
            return 0 if t0.correct else EXIT_NOT_CORRECT
        node = t0 or store.add_node(source, parent=None, stage="baseline")
        ev = session.executor.evaluate(source, seed=args.seed)
        node = _record(store, node.id, ev, args.seed)
    finally:
        session.executor.close()
        store.close()
    _emit(args, {"tree": str(store.dir), "baseline": node.as_dict()}, f"tree {store.dir}: {_node_line(node)}")
    return 0 if node.correct else EXIT_NOT_CORRECT


def _save_as_add(args: argparse.Namespace) -> None:
    """Xe-Forge's ``trial save NAME FILE --parent P --strategy S`` as ``trial add FILE --name NAME``: a
    strategy that names a stage becomes ``--stage``; free text goes to ``discovery`` and is kept."""
    from kernelpilot.migration import notice, stage_alias
    from kernelpilot.pipeline.contracts import STAGE_ORDER

    stage = stage_alias(args.strategy.strip()) if args.strategy.strip() else "discovery"
    args.strategy_text = "" if stage in STAGE_ORDER else args.strategy
    args.stage = stage if stage in STAGE_ORDER else "discovery"
    args.name, args.seed = args.kernel_name, None
    notice(
        f"`skill trial save {args.kernel_name} FILE --strategy ...` is now "
        f"`skill trial add FILE --name {args.kernel_name} --parent {args.parent} --stage {args.stage}`"
    )


def _trial_add(args: argparse.Namespace, store: Any) -> int:
    from kernelpilot.errors import InputError
    from kernelpilot.pipeline.contracts import STAGE_ORDER
    from kernelpilot.pipeline.session import open_session

    if args.stage not in STAGE_ORDER:
        raise InputError(f"unknown stage {args.stage!r}; allowed: {', '.join(STAGE_ORDER)}", field="--stage")
    meta = store.meta()
    if "spec_path" not in meta:
        raise InputError(
            f"tree {store.dir} has no spec path; create it with `skill trial init`", field="--name"
        )
    original = Path(meta["kernel_path"])
    session = open_session(
        original,
        Path(meta["spec_path"]),
        variant=meta["variant"],
        device=meta["device"],
        dsl=meta["dsl"],
        cli_settings={"correctness_rtol": float(meta["rtol"]), "correctness_atol": float(meta["atol"])},
    )
    budget = int(meta.get("max_agent_trials", "0") or 0)
    used = sum(1 for n in store.nodes() if n.engine == "agent")
    if budget and used >= budget:
        raise InputError(
            f"trial budget exhausted: {used} of MAX_TRIALS={budget} agent trials in {store.dir}; "
            "finalize the best one (`kernelpilot skill trial finalize`)",
            field="MAX_TRIALS",
        )
    source = args.file.read_text(encoding="utf-8")
    node = store.add_node(source, parent=args.parent, stage=args.stage, engine="agent")
    if getattr(args, "strategy_text", ""):
        store.update_extra(node.id, {"strategy": args.strategy_text})
    seed = args.seed if args.seed is not None else 20240601 + node.seq
    try:
        problems = session.executor.validate(source)
        if problems:
            from kernelpilot.pipeline.contracts import Evaluation

            ev = Evaluation(verdict="invalid", message="static validation: " + "; ".join(problems))
        else:
            ev = session.executor.evaluate(source, seed=seed)
    finally:
        session.executor.close()
    node = _record(store, node.id, ev, seed)
    _emit(args, node.as_dict(), _node_line(node))
    return 0 if node.correct else EXIT_NOT_CORRECT


def _record(store: Any, node_id: str, ev: Any, seed: int) -> Any:
    from kernelpilot.pipeline.contracts import timing_columns

    return store.record_result(
        node_id, verdict=ev.verdict, message=ev.message, seed=seed, **timing_columns(ev.timing)
    )


def _node_line(node: Any) -> str:
    text = f"{node.id} ({node.stage}, parent {node.parent}): {node.verdict}"
    if node.median_ms is not None:
        text += f", {node.median_ms:.4g} ms"
    if node.speedup is not None:
        text += f", {node.speedup:.3f}x vs t0"
    if node.speedup_vs_parent is not None:
        text += f", {node.speedup_vs_parent:.3f}x vs parent"
    if node.interpreter:
        text += " [interpreter timings]"
    if node.verdict != "correct" and node.message:
        text += f"\n  {node.message[:2000]}"
    return text
