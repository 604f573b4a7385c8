"""The FMHA programs with and without ``-ftz=true``, timed side by side on one GPU.

``fmha_ftz_sass_check.py`` counts what the flag removes from the kernels; this measures what it is worth.
For each case of that script (the confirmed H200 winners, head dims 64 and 128, prefill and decode) the
tuner's program is built twice, with the grouped programs' flags (the FMHA build up to template 2) and
with ``FMHA_NVCC_FLAGS``; on the GPU both run in alternating order for ``--rounds`` rounds (each run: the
program's own checks, then its CUDA-graph timing, median of its repetitions), and the record holds every
round, the medians and ``speedup`` = median without / median with the flag.  A run that fails its check
or prints no result marks its case failed; the others go on.

    # CPU (or the device's 16 cores): build whatever DIR lacks
    python benchmarks/fmha_ftz_ab.py build --dir .kp-ftz-ab --jobs 2
    # GPU
    python benchmarks/fmha_ftz_ab.py run --dir .kp-ftz-ab --rounds 6 --out $OUT/fmha_ftz_ab.json

CUTLASS headers with ``examples/88_hopper_fmha``: ``--cutlass-dir`` or ``CUTLASS_DIR`` (build only).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fmha_ftz_sass_check import FLAG_SETS, render_cases

from kernelpilot.errors import ToolMissingError
from kernelpilot.tile_tuner.kernel_api import parse_result_line
from kernelpilot.toolchain import tool_version

MANIFEST = "manifest.json"
#: ptxas's register report: part of the tuner's flags, not of the code, so the A/B builds leave it out
PTXAS_REPORT = ("-Xptxas", "-v")


def build(folder: Path, cutlass_dir: str, jobs: int) -> int:
    """Render every case and build both flag variants into ``folder`` (those already there are kept)."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        recipe, rendered = render_cases(folder, cutlass_dir)
    except ToolMissingError as exc:
        print(f"error: {exc} (--cutlass-dir or CUTLASS_DIR)", file=sys.stderr)
        return 1
    includes = [f"-I{p}" for p in recipe.include_dirs]
    flag_sets = {
        label: tuple(f for f in flags if f not in PTXAS_REPORT) for label, flags in FLAG_SETS.items()
    }
    cases, todo = [], []
    for case in rendered:
        argv, _ = case["kernel"].run_command(Path("BINARY"), case["problem"], {})
        binaries = {label: f"case{case['index']}_{label}" for label in FLAG_SETS}
        cases.append(
            {**{k: case[k] for k in ("kind", "workload", "config")}, "args": argv[1:], "binaries": binaries}
        )
        todo += [(case["source"], flag_sets[label], folder / name) for label, name in binaries.items()
                 if not (folder / name).exists()]  # fmt: skip

    errors = compile_programs(todo, includes, jobs)
    manifest = {"nvcc": tool_version("nvcc"), "cutlass": recipe.library_version,
                "flags": {label: list(flags) for label, flags in flag_sets.items()}, "cases": cases}  # fmt: skip
    return finish_build(folder, manifest, len(todo), errors)


def fmha_build_inputs(kind: str, cutlass_dir: str) -> tuple[Any, list[str], tuple[str, ...]] | None:
    """The recipe, include flags and nvcc flags (``FMHA_NVCC_FLAGS`` less :data:`PTXAS_REPORT`) the tuner
    builds a ``kind`` program with; None, after naming ``--cutlass-dir``, when CUTLASS is not found."""
    from cuda_kinds_common import kernels

    from kernelpilot.dsl_plugins.cuda.fmha import FMHA_NVCC_FLAGS

    try:
        recipe = kernels()[kind].build_recipe("sm90", {"cutlass_dir": cutlass_dir or None})
    except ToolMissingError as exc:
        print(f"error: {exc} (--cutlass-dir or CUTLASS_DIR)", file=sys.stderr)
        return None
    flags = tuple(f for f in FMHA_NVCC_FLAGS if f not in PTXAS_REPORT)
    return recipe, [f"-I{p}" for p in recipe.include_dirs], flags


def compile_programs(
    todo: list[tuple[Path, tuple[str, ...], Path]], includes: list[str], jobs: int
) -> list[str]:
    """nvcc every (source, flags, binary) of ``todo`` on ``jobs`` threads; one error line per failed build."""

    def compile_one(job: tuple[Path, tuple[str, ...], Path]) -> str:
        source, flags, binary = job
        done = subprocess.run(
            ["nvcc", *flags, *includes, "-o", str(binary), str(source)], capture_output=True, text=True
        )
        return "" if done.returncode == 0 else f"{binary.name}: {done.stderr.strip()[-800:]}"

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return [e for e in pool.map(compile_one, todo) if e]


def stage_source(folder: Path, name: str, text: str) -> bool:
    """Write ``name``.cu into ``folder`` when its text changed, dropping the stale binary; True when the
    binary ``name`` must be built."""
    source = folder / f"{name}.cu"
    if not source.exists() or source.read_text() != text:
        source.write_text(text)
        (folder / name).unlink(missing_ok=True)
    return not (folder / name).exists()


def finish_build(folder: Path, manifest: dict, built: int, errors: list[str]) -> int:
    """Write the manifest, report the failed builds and the count; 1 when any build failed."""
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    for error in errors:
        print(error, file=sys.stderr)
    print(f"built {built - len(errors)} of {built} missing programs into {folder}")
    return 1 if errors else 0


def build_staged(folder: Path, cutlass_dir: str, jobs: int, kind: str, cases: list[dict]) -> int:
    """Stage and build the variant programs of ``cases`` into ``folder`` with the tuner's ``kind`` flags,
    each binary once (problem sizes are run-time, so workloads share a config's binary), and write the
    manifest.  A case holds its manifest fields (kind, workload, config, args, args_of) and ``sources``:
    {variant label: (binary name, source text)}; the manifest lists the names as ``binaries``.  1 without
    CUTLASS (after naming ``--cutlass-dir``, nothing staged) or when a build failed."""
    folder.mkdir(parents=True, exist_ok=True)
    inputs = fmha_build_inputs(kind, cutlass_dir)
    if inputs is None:
        return 1
    recipe, includes, flags = inputs
    listed, todo, staged = [], [], set()
    for case in cases:
        sources = case["sources"]
        for name, text in sources.values():
            if name in staged:
                continue
            staged.add(name)
            if stage_source(folder, name, text):
                todo.append((folder / f"{name}.cu", flags, folder / name))
        binaries = {label: name for label, (name, _) in sources.items()}
        listed.append({**{k: v for k, v in case.items() if k != "sources"}, "binaries": binaries})
    errors = compile_programs(todo, includes, jobs)
    manifest = {"nvcc": tool_version("nvcc"), "cutlass": recipe.library_version, "flags": list(flags),
                "cases": listed}  # fmt: skip
    return finish_build(folder, manifest, len(todo), errors)


def ab_parser(description: str, build_help: str, run_help: str) -> tuple[argparse.ArgumentParser, Any]:
    """The A/B scripts' command line: ``build --dir [--cutlass-dir] [--jobs]`` and ``run --dir [--rounds] --out``;
    the subparsers object comes back for a script's extra modes."""
    ap = argparse.ArgumentParser(description=description)
    sub = ap.add_subparsers(dest="mode", required=True)
    b = sub.add_parser("build", help=build_help)
    b.add_argument("--dir", required=True)
    b.add_argument("--cutlass-dir", default=os.environ.get("CUTLASS_DIR", ""))
    b.add_argument("--jobs", type=int, default=2)
    r = sub.add_parser("run", help=run_help)
    r.add_argument("--dir", required=True)
    r.add_argument("--rounds", type=int, default=6)
    r.add_argument("--out", required=True)
    return ap, sub


def missing_manifest(folder: Path) -> bool:
    """True (after saying so) when ``folder`` has no build manifest."""
    if (folder / MANIFEST).exists():
        return False
    print(f"error: --dir {folder} has no {MANIFEST}: run the build mode first", file=sys.stderr)
    return True


def too_few_rounds(rounds: int) -> bool:
    """True (after saying so) when ``rounds`` cannot alternate the order."""
    if rounds >= 2:
        return False
    print("error: --rounds must be at least 2 (the order alternates between rounds)", file=sys.stderr)
    return True


def run_once(binary: Path, args: list[str]) -> dict:
    """One program run: its median ms and run-time knobs when it passed its checks, else why not."""
    done = subprocess.run([str(binary), *args], capture_output=True, text=True)
    try:
        result = parse_result_line(done.stdout)
    except ValueError as exc:
        return {"ok": False, "why": f"rc={done.returncode}: {exc}; {done.stderr.strip()[-300:]}"}
    passed = result.verification is not None and result.verification.passed
    if result.status != "ok" or not passed or result.time_ms is None:
        return {"ok": False, "why": f"status={result.status} verification={passed} {result.message}".strip()}
    return {"ok": True, "ms": result.time_ms.median, "runtime": result.runtime}


def measure(folder: Path, rounds: int, baseline: str) -> list[dict]:
    """Every case's programs in alternating order (forward, then reversed), ``rounds`` times; medians,
    spreads and ``speedup`` = {variant: median of ``baseline`` / median of the variant}.  A case's
    ``args_of`` gives a variant its own arguments (one that reads a flag the other lacks), else ``args``."""
    manifest = json.loads((folder / MANIFEST).read_text())
    rows = []
    for case in manifest["cases"]:
        labels = list(case["binaries"])
        times: dict[str, list[float]] = {label: [] for label in labels}
        failure = ""
        for r in range(rounds):
            for label in labels if r % 2 == 0 else labels[::-1]:
                args = case.get("args_of", {}).get(label, case["args"])
                got = run_once(folder / case["binaries"][label], args)
                if not got["ok"]:
                    failure = f"{label}: {got['why']}"
                    break
                times[label].append(got["ms"])
            if failure:
                break
        row = {key: case[key] for key in ("kind", "workload", "config", "args", "args_of") if key in case}
        if failure:
            rows.append({**row, "status": "failed", "why": failure, "ms": times})
            continue
        med = {label: statistics.median(ts) for label, ts in times.items()}
        spread = {label: round((max(ts) - min(ts)) / med[label], 4) for label, ts in times.items()}
        speedup = {label: round(med[baseline] / med[label], 4) for label in labels if label != baseline}
        rows.append(
            {**row, "status": "ok", "ms": times, "median_ms": med, "spread": spread, "speedup": speedup}
        )
    return rows


def report_rows(rows: list[dict]) -> None:
    """One console line per case of :func:`measure`: its medians, speedups and spreads, or why it failed."""
    for row in rows:
        label = f"{row['workload']} {json.dumps(row['config'], separators=(',', ':'))}"
        if row["status"] != "ok":
            print(f"{label}: failed: {row['why']}")
            continue
        print(f"{label}: ms {row['median_ms']}  speedup {row['speedup']}  spread {row['spread']}")


def device_name() -> str:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True)  # fmt: skip
        return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else ""
    except FileNotFoundError:
        return ""


def run_and_record(args: argparse.Namespace, script: str, baseline: str, what: str,
                   built_with: tuple[str, ...] = ("nvcc", "cutlass", "flags")) -> int:  # fmt: skip
    """The A/B scripts' run mode: check the folder and rounds (exit 2), :func:`measure`, write the record
    (``what``, date, device, the command, the manifest's ``built_with`` keys, every row) to ``--out``,
    print one line per case; exit 1 when a case failed."""
    folder = Path(args.dir)
    if missing_manifest(folder) or too_few_rounds(args.rounds):
        return 2
    rows = measure(folder, args.rounds, baseline=baseline)
    manifest = json.loads((folder / MANIFEST).read_text())
    record = {
        "what": what,
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": device_name(),
        "command": f"python benchmarks/{script} run --dir {args.dir} --rounds {args.rounds} --out {Path(args.out).name}",
        "built_with": {key: manifest[key] for key in built_with},
        "rows": rows,
    }  # fmt: skip
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    report_rows(rows)
    return 0 if all(row["status"] == "ok" for row in rows) else 1


def main(argv: list[str] | None = None) -> int:
    ap, _ = ab_parser(__doc__.splitlines()[0], "render and build both variants of every case into --dir",
                      "time both variants side by side (GPU)")  # fmt: skip
    args = ap.parse_args(argv)
    if args.mode == "build":
        return build(Path(args.dir), args.cutlass_dir, args.jobs)
    return run_and_record(
        args, "fmha_ftz_ab.py", "without_ftz",
        "FMHA programs with and without -ftz=true, alternating order per round, each run checked; "
        "speedup = median ms without / median ms with the flag",
    )  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
