"""Optimize a kernel: baseline, analysis, plan, per-stage optimize/verify loops, final check.

Engines: ``rules`` (no LLM; what ``auto`` picks when no LLM endpoint/key is configured), ``llm``
(litellm, any provider), ``claude`` (writes an agent workspace; launches ``claude`` only with
``--auto-launch``).  Every candidate is checked against the oracle (the ``<kernel>_pytorch.py``
reference beside the kernel, else the original kernel); a stage keeps a candidate only if it is
correct and faster than that stage's input by more than the measured noise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, cast


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-i", "--input", required=True, type=Path, help="kernel file (Model + kernels)")
    parser.add_argument("-s", "--spec", required=True, type=Path, help="spec YAML (inputs, inits, variants)")
    parser.add_argument(
        "-o", "--output", type=Path, help="where to write the best kernel (rank 2.. beside it)"
    )
    parser.add_argument(
        "-n", "--name", help="trial tree name (default: the kernel file's stem; not a function name)"
    )
    parser.add_argument(
        "--variant", help="spec variant (default: default_variant > bench-gpu > the only one)"
    )
    parser.add_argument("--device", choices=("cuda", "xpu", "cpu"), help="default: cuda > xpu > cpu")
    parser.add_argument("--dsl", help="DSL plugin (default: detected from the file)")
    parser.add_argument(
        "--engine",
        choices=("auto", "llm", "rules", "claude", "dspy"),
        help="default: ENGINE or auto (dspy: deprecated name of llm)",
    )
    parser.add_argument(
        "--stages", help="comma-separated stages to run (or 'all'); default: from the analysis"
    )
    parser.add_argument(
        "--correctness-only-stages",
        default="",
        help="stages whose candidates need only be correct, not faster (e.g. under the CPU interpreter)",
    )
    parser.add_argument("--best-k", type=int, help="write the k best verified kernels (BEST_K)")
    parser.add_argument("--max-iterations", type=int, help="attempts per stage (AGENT_MAX_ITERATIONS)")
    parser.add_argument("--max-trials", type=int, help="evaluated candidates per run (MAX_TRIALS)")
    parser.add_argument("--trials-dir", type=Path, help="trial trees folder (TRIALS_DIR)")
    parser.add_argument("--fresh-trials", action="store_true", help="move an existing tree aside, start anew")
    parser.add_argument(
        "--rtol", type=float, help="relative tolerance (CLI > spec > CORRECTNESS_RTOL > 1e-2)"
    )
    parser.add_argument(
        "--atol", type=float, help="absolute tolerance (CLI > spec > CORRECTNESS_ATOL > 1e-5)"
    )
    parser.add_argument("--model", help="litellm model (LLM_MODEL)")
    parser.add_argument("--api-base", help="OpenAI-compatible endpoint (OPENAI_API_BASE)")
    parser.add_argument("--api-key", help="API key (OPENAI_API_KEY; never logged)")
    parser.add_argument("--num-warps", type=int, help="default num_warps hint (DEFAULT_NUM_WARPS)")
    parser.add_argument("--tile-size", type=int, help="preferred tile M and N hint (PREFERRED_TILE_M/N)")
    parser.add_argument("--target-dtype", choices=("float16", "bfloat16", "float32"), help="TARGET_DTYPE")
    parser.add_argument("--seed", type=int, default=20240601, help="base seed of the random inputs")
    parser.add_argument(
        "--noise-repeats", type=int, default=3, help="baseline timings for the noise estimate"
    )
    parser.add_argument("--record", type=Path, help="run record JSON path (default: LOG_DIR/run-*.json)")
    parser.add_argument("--workspace", type=Path, help="claude engine: workspace folder")
    parser.add_argument(
        "--auto-launch",
        action="store_true",
        default=None,
        help="claude engine: run `claude -p` headless (AUTO_LAUNCH)",
    )
    parser.add_argument("--max-turns", type=int, default=80, help="claude engine: --max-turns for claude")
    parser.add_argument(
        "--no-correctness",
        action="store_true",
        help="not supported: kernelpilot never accepts a candidate without a correctness check",
    )
    parser.add_argument("--vtune", dest="vtune", action="store_true", default=None, help="VTUNE_ENABLED=true")
    parser.add_argument("--no-vtune", dest="vtune", action="store_false", help="VTUNE_ENABLED=false")
    parser.add_argument("--vtune-bin", help="VTUNE_BIN")
    parser.add_argument(
        "--no-trials",
        action="store_true",
        help="not supported: the trial tree is what lets a run survive a crash (use --trials-dir)",
    )
    parser.add_argument(
        "--profile",
        nargs="?",
        const="auto",
        choices=("auto", "ncu", "vtune"),
        help="collect hardware counters of each stage's input and feed a summary to the next prompt "
        "(auto: ncu on NVIDIA, vtune on Intel)",
    )
    parser.add_argument(
        "--target-speedup", type=float, help="stop after the stage that reaches it (TARGET_SPEEDUP)"
    )
    parser.add_argument("--debug", action="store_true", help="LOG_LEVEL=DEBUG: full rejection messages")
    parser.add_argument("--json", action="store_true", help="print the run summary as JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def cli_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Flags that map onto settings (None = not given, so env/spec/defaults apply)."""
    tile = getattr(args, "tile_size", None)
    return {
        "engine": args.engine,
        "best_k": args.best_k,
        "agent_max_iterations": args.max_iterations,
        "max_trials": args.max_trials,
        "trials_dir": args.trials_dir,
        "correctness_rtol": args.rtol,
        "correctness_atol": args.atol,
        "llm_model": args.model,
        "openai_api_base": args.api_base,
        "openai_api_key": args.api_key,
        "default_num_warps": args.num_warps,
        "preferred_tile_m": tile,
        "preferred_tile_n": tile,
        "target_dtype": args.target_dtype,
        "log_level": "DEBUG" if getattr(args, "debug", False) else None,
        "vtune_enabled": getattr(args, "vtune", None),
        "vtune_bin": getattr(args, "vtune_bin", None),
        "auto_launch": getattr(args, "auto_launch", None),
        "workspace": getattr(args, "workspace", None),
        "target_speedup": getattr(args, "target_speedup", None),
    }


def run(args: argparse.Namespace) -> int:
    from kernelpilot.errors import InputError

    if args.no_correctness:
        raise InputError(
            "--no-correctness is not supported: every candidate is checked against the oracle "
            "(loosen --rtol/--atol instead)",
            field="--no-correctness",
        )
    if args.no_trials:
        raise InputError(
            "--no-trials is not supported: every attempt is recorded so an interrupted run can resume; "
            "point --trials-dir at a scratch folder instead",
            field="--no-trials",
        )
    from kernelpilot.pipeline.planner import parse_stages
    from kernelpilot.pipeline.session import open_session

    stages = parse_stages(args.stages)
    correctness_only = set(parse_stages(args.correctness_only_stages) or [])
    session = open_session(
        args.input,
        args.spec,
        variant=args.variant,
        device=args.device,
        dsl=args.dsl,
        cli_settings=cli_settings(args),
        prepare=False,
    )
    _check_output_paths(args, session.settings)
    engine = session.settings.resolved_engine()
    log = (lambda m: None) if args.quiet or args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    profiler = _profiler_choice(args, session)
    if engine == "claude":
        return _run_claude(args, session, log)
    return _run_pipeline(args, session, engine, stages, correctness_only, log, profiler)


def _check_output_paths(args: argparse.Namespace, settings: Any) -> None:
    """Every place the run writes to is usable now, not found broken after the whole run."""
    from kernelpilot.fileio import check_output_dir, check_output_file

    if args.output is not None:
        check_output_file(args.output, field="--output")
    else:
        check_output_dir(settings.kernel_dir, field="KERNEL_DIR")
    if args.record is not None:
        check_output_file(args.record, field="--record")
    else:
        check_output_dir(settings.log_dir, field="LOG_DIR")
    check_output_dir(settings.trials_dir, field="--trials-dir / TRIALS_DIR")
    if getattr(args, "workspace", None) is not None:
        check_output_dir(args.workspace, field="--workspace")


def _profiler_choice(args: argparse.Namespace, session: Any) -> str | None:
    """``--profile`` (auto: by device), or VTUNE_ENABLED=true; None = no counters."""
    choice = getattr(args, "profile", None)
    if choice is None and session.settings.vtune_enabled:
        choice = "vtune"
    if choice == "auto":
        choice = {"cuda": "ncu", "xpu": "vtune"}.get(session.device)
        if choice is None:
            from kernelpilot.errors import InputError

            raise InputError(
                "--profile needs a GPU (ncu on NVIDIA, vtune on Intel); this run's device is cpu",
                field="--profile",
            )
    return choice


def _run_pipeline(args, session, engine, stages, correctness_only, log, profiler=None) -> int:
    from kernelpilot.engines.selection import implemented_stages
    from kernelpilot.pipeline.runner import Pipeline, PipelineOptions
    from kernelpilot.pipeline.setup import plugin_parts

    parts = plugin_parts(session.registry, session.dsl, session.device)
    impls = implemented_stages(engine, session.dsl, parts.stages, parts.prompt_dirs)
    llm = None
    if engine == "llm":
        from kernelpilot.llm.client import LLMClient, import_litellm

        import_litellm()  # fail now (exit 1, clear message) rather than in every stage attempt
        llm = LLMClient(session.settings)
    options = PipelineOptions(
        kernel_path=session.kernel_path,
        spec_path=session.spec_path,
        variant=session.variant,
        dsl=session.dsl,
        device=session.device,
        engine=engine,
        output=args.output,
        stages=stages,
        correctness_only_stages=correctness_only,
        trial_name=args.name,
        fresh_trials=args.fresh_trials,
        seed=args.seed,
        noise_repeats=args.noise_repeats,
        record_path=args.record,
        profiler=profiler,
    )
    log(
        f"kernelpilot optimize: {session.kernel_path} dsl={session.dsl} device={session.device} engine={engine}"
    )
    pipeline = Pipeline(
        session.settings,
        options,
        spec=session.spec,
        executor=session.executor,
        stage_impls=impls,
        analyzers=parts.analyzers,
        prompt_dirs=parts.prompt_dirs,
        knowledge_dirs=parts.knowledge_dirs,
        llm=llm,
        log=log,
    )
    result = pipeline.run()
    interp = any(e.get("interpreter") for e in result.record.final)
    summary = {
        "improved": result.improved,
        "speedup": None if interp else result.speedup,  # interpreter ratios are not speedups
        "interpreter_timings": interp,
        "outputs": [str(p) for p in result.outputs],
        "record": str(result.record_path),
        "trial_tree": result.record.trial_tree,
        "stages": [
            {"stage": s.stage, "status": s.status, "attempts": s.attempts, "accepted": s.accepted}
            for s in result.record.stages
        ],
        "final": result.record.final,
        "warnings": result.record.warnings,
        "llm_usage": result.record.llm_usage,
    }
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        for s in result.record.stages:
            print(f"  {s.stage:<18} {s.status:<16} attempts={s.attempts} accepted={s.accepted or '-'}")
        if interp:
            verdict = "n/a (CPU interpreter timings are not a performance result)"
        else:
            verdict = f"{result.speedup:.3f}x" if result.speedup else "n/a"
        state = (
            "changed (verified correct)"
            if interp and result.improved
            else ("improved" if result.improved else "not improved")
        )
        outputs = cast(list[str], summary["outputs"])  # the summary's file list (mixed-value dict)
        print(f"{state}: speedup {verdict}; wrote {', '.join(outputs)}; record {result.record_path}")
        for warning in result.record.warnings:
            print(f"warning: {warning}")
    return 0


def _run_claude(args, session, log) -> int:
    from kernelpilot.engines.claude_workspace import launch_claude, write_workspace

    session.executor.close()
    workspace = session.settings.workspace or Path("claude_workspace") / (
        args.name or session.kernel_path.stem
    )
    info = write_workspace(
        workspace,
        kernel_path=session.kernel_path,
        spec_path=session.spec_path,
        variant=session.variant,
        dsl=session.dsl,
        device=session.device,
        settings=session.settings,
        registry=session.registry,
    )
    print(f"wrote agent workspace {info.path} (kernel {info.kernel_name}); open it with `claude` there")
    if session.settings.workspace_git_init:
        from kernelpilot.engines.claude_workspace import git_init

        print(git_init(info.path))
    if session.settings.auto_launch:
        launched = launch_claude(info, max_turns=args.max_turns)
        print(launched.message)
        return 0 if launched.launched else 1
    print(
        "not launched (pass --auto-launch or set AUTO_LAUNCH=true to start `claude -p` headless; "
        "permission checks stay on)"
    )
    return 0
