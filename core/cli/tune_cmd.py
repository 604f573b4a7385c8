"""Tile-tune CUTLASS kernels: propose configs, reject illegal ones, build, benchmark, report.

Batch:   kernelpilot tune FILE.yaml [--target sm90] [--proposer model] [--dry-run]
Single:  kernelpilot tune --target sm90 --kernel gemm --dims M=8192,N=8192,K=8192 [--dtype bf16]
Replay:  kernelpilot tune FILE.yaml --replay tests/data/replay/h200_gemm_bf16.sqlite --proposer bayes
After the search the finalists are re-measured in interleaved rounds with the vendor library
(--finalists, --confirm-rounds, --no-baseline; docs/tile_tuner.md "Confirmation").
CLI flags override the YAML.  Exit codes: 0 ok, 1 runtime failure, 2 bad input (nothing written).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

PROPOSERS = ("model", "exhaustive", "random", "bayes", "llm", "hybrid")
SEED_MAX = 2**32 - 1  # numpy and optuna seeds are 32-bit


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", help="batch YAML (native schema or Xe-Forge format)")
    parser.add_argument("--target", help="target model: sm90, bmg, pvc, ... (overrides the YAML)")
    parser.add_argument(
        "--kernel",
        help="kernel kind for a single workload (gemm, grouped_gemm, moe_gemm, fa_prefill, fa_decode)",
    )
    parser.add_argument("--dims", help="single workload dims, e.g. M=8192,N=8192,K=8192")
    parser.add_argument("--name", help="single workload name (default: from the dims)")
    parser.add_argument("--dtype", help="data type (bf16, f16, ...)")
    parser.add_argument("--layout", help="GEMM layout: rr (x @ W, default) or rc")
    parser.add_argument("--proposer", choices=PROPOSERS, help="search strategy (default: model)")
    parser.add_argument(
        "--proposer-options",
        help="JSON object of the proposer's options, e.g. '{\"startup\": 8}' for bayes (overrides the YAML)",
    )
    parser.add_argument(
        "--budget-configs", type=int, help="compile configs measured per workload (default 16)"
    )
    parser.add_argument("--budget-minutes", type=float, help="wall-clock budget for the whole run")
    parser.add_argument("--patience", type=int, help="stop a workload after N configs without a 0.5%% gain")
    parser.add_argument("--seed", type=int, help="proposer seed")
    parser.add_argument("--space-filter", help="JSON filter of the legal space, e.g. '{\"tile_k\": [64]}'")
    parser.add_argument("--jobs", type=int, help="parallel compile jobs (default: from cores and memory)")
    parser.add_argument("--batch-size", type=int, help="configs proposed per round (default: --jobs)")
    parser.add_argument(
        "--out", default="kp_runs/latest", help="output folder (JSON, CSV, plots, build logs)"
    )
    parser.add_argument("--store", help="results store (default: .kernelpilot/results.sqlite)")
    parser.add_argument("--cache-dir", help="build cache (default: .kernelpilot/build_cache)")
    parser.add_argument("--remeasure", action="store_true", help="measure again what the store already has")
    parser.add_argument("--replay", help="serve measurements from a recorded store instead of running")
    parser.add_argument(
        "--dry-run", action="store_true", help="plan and render programs + CMake project; build nothing"
    )
    parser.add_argument(
        "--device", help="catalogue device to model (default: detected, else the target's default)"
    )
    parser.add_argument("--run-timeout", type=float, default=120.0, help="seconds per benchmark run")
    parser.add_argument("--build-timeout", type=float, default=900.0, help="seconds per config compile")
    parser.add_argument("--target-ms", type=float, help="timed milliseconds per repetition in the program")
    parser.add_argument("--reps", type=int, help="timed repetitions per run-time variant")
    parser.add_argument(
        "--cutlass-dir", help="CUTLASS checkout or nvidia-cutlass --target folder (else CUTLASS_DIR)"
    )
    parser.add_argument(
        "--sycl-tla-dir", help="sycl-tla checkout or `pip install --target` folder (else SYCL_TLA_DIR)"
    )
    parser.add_argument(
        "--aot-device",
        help="icpx AOT device (bmg-g21, bmg-g31, pvc, ...); default: from --device's catalogue entry",
    )
    parser.add_argument("--icpx", help="path of the icpx compiler (else found on PATH)")
    parser.add_argument("--json", action="store_true", help="print the run JSON instead of the table")
    parser.add_argument("--no-plots", action="store_true", help="skip PNG plots")
    parser.add_argument(
        "--no-streamk-twins", action="store_true", help="keep cooperative configs persistent-only"
    )
    parser.add_argument(
        "--finalists",
        type=int,
        default=3,
        help="configs re-measured after the search, with the library default (0: no confirmation)",
    )
    parser.add_argument(
        "--confirm-rounds", type=int, default=3, help="interleaved confirmation rounds (default 3)"
    )
    parser.add_argument(
        "--confirm-extra-rounds",
        type=int,
        default=None,
        help="rounds added when the leading finalist or the vendor spreads more than 3 %% "
        "(default: as many as --confirm-rounds; 0: never)",
    )
    parser.add_argument(
        "--no-baseline", action="store_true", help="do not measure the vendor library (cuBLAS, SDPA, ...)"
    )
    parser.add_argument("--gpus", help="benchmark on several GPUs of this host: all, or indices such as 0,1")
    parser.add_argument(
        "--cluster", help="run on Dask distributed: tcp://SCHEDULER:8786, or local (docs/distributed.md)"
    )


def _workloads(args: argparse.Namespace) -> tuple[str, list[Any], dict[str, Any]]:
    import json

    from kernelpilot.errors import InputError
    from kernelpilot.tile_tuner.batch import BUILTIN_DEFAULTS, _workload, load_batch, parse_dims

    space = None
    if args.space_filter:
        try:
            space = json.loads(args.space_filter)
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON: {exc}", field="--space-filter") from exc
        if not isinstance(space, dict) or not all(isinstance(v, list) for v in space.values()):
            raise InputError(
                "must be a JSON object of field -> list of allowed values", field="--space-filter"
            )
    proposer_options = None
    if args.proposer_options:
        try:
            proposer_options = json.loads(args.proposer_options)
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON: {exc}", field="--proposer-options") from exc
        if not isinstance(proposer_options, dict):
            raise InputError(
                "must be a JSON object of option -> value, e.g. '{\"startup\": 8}'",
                field="--proposer-options",
            )
    overrides = {
        "kernel": args.kernel,
        "dtype": args.dtype,
        "layout": args.layout,
        "proposer": args.proposer,
        "proposer_options": proposer_options,
        "budget_configs": args.budget_configs,
        "patience": args.patience,
        "seed": args.seed,
        "space": space,
    }
    for name in ("budget_configs", "patience"):
        if overrides[name] is not None and overrides[name] < 1:
            raise InputError(f"must be >= 1, got {overrides[name]}", field=f"--{name.replace('_', '-')}")
    if args.file:
        if args.dims:
            raise InputError("give either a batch FILE or --dims, not both", field="--dims")
        target, workloads, extras = load_batch(Path(args.file), overrides, args.target)
    else:
        if not args.dims:
            raise InputError(
                "give a batch FILE, or --kernel and --dims for a single workload", field="--dims"
            )
        if not args.target:
            raise InputError(
                "--target is required for a single workload (sm90, bmg, pvc, ...)", field="--target"
            )
        dims = parse_dims(args.dims)
        merged = dict(BUILTIN_DEFAULTS)
        merged.update({k: v for k, v in overrides.items() if v is not None})
        name = args.name or "_".join(f"{k}{v}" for k, v in dims.items())
        target, workloads, extras = (
            args.target,
            [_workload(name, dims, merged, args.target, f"--dims {args.dims}")],
            {"format": "cli"},
        )
    if space is not None:
        for w in workloads:  # a filter error names the flag the filter came from, not the file's space:
            w.space_field = "--space-filter"
    return target, workloads, extras


def _check_flags(args: argparse.Namespace) -> None:
    """Every numeric flag in range before anything runs: a bad number must not poison the store
    (a run timeout of 0 would record every config as ``timeout``, a negative build timeout would
    cache build failures)."""
    from kernelpilot.fileio import check_number

    check_number(args.run_timeout, "--run-timeout", exclusive_minimum=0)
    check_number(args.build_timeout, "--build-timeout", exclusive_minimum=0)
    check_number(args.budget_minutes, "--budget-minutes", exclusive_minimum=0)
    check_number(args.target_ms, "--target-ms", exclusive_minimum=0)
    check_number(args.batch_size, "--batch-size", minimum=1)
    check_number(args.reps, "--reps", minimum=1)
    check_number(args.jobs, "--jobs", minimum=1)
    check_number(args.seed, "--seed", minimum=0, maximum=SEED_MAX)


def _check_paths(
    args: argparse.Namespace, out_dir: Path, store: Path, cache_dir: Path, extras: dict[str, Any]
) -> None:
    """Output paths must be usable and the replay store readable before the first build, not after."""
    from kernelpilot.fileio import check_output_dir, check_output_file

    check_output_dir(out_dir, field="--out")
    check_output_file(store, field="--store")
    check_output_dir(cache_dir, field="--cache-dir")
    if extras.get("output"):
        check_output_file(Path(extras["output"]), field="output")
    if args.replay:
        from kernelpilot.tile_tuner.store import check_store_file

        check_store_file(Path(args.replay), field="--replay")
    if store.exists():
        from kernelpilot.tile_tuner.store import check_store_file

        check_store_file(store, field="--store")


def _kernel_options(args: argparse.Namespace) -> dict[str, Any]:
    """Backend build options from the flags; only what the user set (a backend's defaults stay its own).

    ``device`` reaches the backend so the SYCL build takes the AOT device of the GPU the user named
    (``--device arc_pro_b70`` builds for ``bmg-g31``); an explicit ``--aot-device`` still wins.
    """
    flags = {
        "cutlass_dir": args.cutlass_dir,
        "sycl_tla_dir": args.sycl_tla_dir,
        "aot_device": args.aot_device,
        "icpx": args.icpx,
        "device": args.device,
    }
    return {key: value for key, value in flags.items() if value}


def run(args: argparse.Namespace) -> int:
    import json
    import os

    from kernelpilot.tile_tuner import report
    from kernelpilot.tile_tuner.api import run_batch
    from kernelpilot.tile_tuner.confirm import ConfirmOptions
    from kernelpilot.tile_tuner.workload import TuneOptions

    _check_flags(args)
    confirm = ConfirmOptions(
        finalists=args.finalists,
        rounds=args.confirm_rounds,
        baseline=not args.no_baseline,
        extra_rounds=args.confirm_extra_rounds,
    ).validate()
    target, workloads, extras = _workloads(args)
    out_dir = Path(args.out)
    state_dir = Path(os.environ.get("KERNELPILOT_HOME", ".kernelpilot"))
    store_path = (
        Path(args.store)
        if args.store
        else (out_dir / "replay_results.sqlite" if args.replay else state_dir / "results.sqlite")
    )
    cache_dir = Path(args.cache_dir) if args.cache_dir else state_dir / "build_cache"
    _check_paths(args, out_dir, store_path, cache_dir, extras)
    bench_args: dict[str, Any] = {}
    if args.target_ms is not None:
        bench_args["target_ms"] = args.target_ms
    if args.reps is not None:
        bench_args["reps"] = args.reps
    options = TuneOptions(
        out_dir=out_dir,
        store_path=store_path,
        cache_dir=cache_dir,
        jobs=args.jobs,
        batch_size=args.batch_size,
        budget_minutes=args.budget_minutes,
        remeasure=args.remeasure,
        replay=Path(args.replay) if args.replay else None,
        run_timeout_s=args.run_timeout,
        build_timeout_s=args.build_timeout,
        device=args.device,
        bench_args=bench_args,
        kernel_options=_kernel_options(args),
        streamk_twins=not args.no_streamk_twins,
        gpus=args.gpus,
        cluster=args.cluster,
        confirm=confirm,
        command="kernelpilot tune " + " ".join(shlex.quote(a) for a in sys.argv[2:]),
    )
    progress = _Progress(sum(w.budget_configs for w in workloads), quiet=args.json or args.dry_run)
    # everything is validated inside run_batch before the first file is written
    with progress:
        doc = run_batch(target, workloads, options, dry_run=args.dry_run, on_event=progress.event)
    if args.dry_run:
        out_dir.mkdir(parents=True, exist_ok=True)
        n = sum(p["programs"] for p in doc["projects"])
        if args.json:
            print(json.dumps(doc, indent=1, default=str))
        else:
            print(f"dry run: {len(doc['workloads'])} workloads, {n} programs rendered into {out_dir}")
            for p in doc["projects"]:
                print(f"  {p['kernel']}: {p['project']} ({p['programs']} programs)")
                for c in p["commands"]:
                    print(f"    {c}")
            for wl in doc["workloads"]:
                for note in wl.get("experimental") or []:
                    print(f"EXPERIMENTAL: {wl['name']}: {note}")
        return 0
    paths = report.write_all(doc, out_dir, plots=not args.no_plots)
    if extras.get("output"):  # the batch file's own output: in Xe-Forge's schema for its files
        xeforge = extras.get("format") == "xe-forge"
        report.write_json(report.xeforge_results(doc) if xeforge else doc, Path(extras["output"]))
    if args.json:
        print(json.dumps(doc, indent=1, default=str))
    else:
        report.console(doc)
        print("outputs: " + ", ".join(f"{k}={v}" for k, v in paths.items()))
    bad = report.problems_of(doc)
    return 0 if not any("ABOVE DEVICE PEAK" in b for b in bad) else 1


class _Progress:
    """rich progress bar: configs measured / rejected, rounds built."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.total = total
        self.quiet = quiet
        self._p: Any = None
        self.counts = {"measured": 0, "failed": 0, "rounds": 0}

    def __enter__(self) -> _Progress:
        if not self.quiet:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self._p = Progress(
                TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(), TimeRemainingColumn(), transient=False,
            )  # fmt: skip
            self._p.__enter__()
            self._task = self._p.add_task("configs measured", total=self.total)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._p is not None:
            self._p.__exit__(*exc)

    def event(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "round":
            self.counts["rounds"] += 1
        elif kind == "measured":
            t = data["tried"]
            self.counts["measured"] += 1
            if t.status != "ok":
                self.counts["failed"] += 1
        if self._p is not None:
            c = self.counts
            what = f" | confirming {data['workload']}" if kind == "confirm" else ""
            self._p.update(
                self._task,
                completed=c["measured"],
                description=f"rounds {c['rounds']} | measured {c['measured']} | failed {c['failed']}{what}",
            )
