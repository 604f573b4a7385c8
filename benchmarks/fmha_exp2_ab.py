"""FMHA programs with a share of the softmax's exponentials on the FMA pipe (``exp2_emulation``), timed side
by side with the same tile on MUFU alone, on one GPU.

At head dim 64 the exponentials (MUFU.EX2, 16 per SM per cycle) take as long per score as the two GEMMs
on the tensor cores; ``exp2_emulation = k`` computes every k-th exponential of a thread's row fragment with
FMA-pipe arithmetic instead (``cpp_templates/cuda/fmha_sm90_kernel.j2``, prelude).  For each case below
the tuner's program is built once per period (0 = none, the baseline) with ``FMHA_NVCC_FLAGS``; on the GPU
they run in alternating order for ``--rounds`` rounds (each run: the program's own checks against its fp32
reference, then its CUDA-graph timing, median of its repetitions), and the record holds every round, the
medians and ``speedup`` = {period: median without / median with}.  A failing run marks its case failed;
the others go on.

    # CPU (or the device's 16 cores): build whatever DIR lacks
    python benchmarks/fmha_exp2_ab.py build --dir .kp-exp2-ab --jobs 2
    # GPU
    python benchmarks/fmha_exp2_ab.py run --dir .kp-exp2-ab --rounds 6 --out $OUT/fmha_exp2_ab.json
    # CPU: the FMHA kernel's SASS opcode counts of every built program (what moves off MUFU)
    python benchmarks/fmha_exp2_ab.py sass --dir .kp-exp2-ab --out benchmarks/results/fmha_exp2_sass.json

CUTLASS headers with ``examples/88_hopper_fmha``: ``--cutlass-dir`` or ``CUTLASS_DIR`` (build only).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from cuda_kinds_common import kernels, problems
from fmha_ftz_ab import (
    MANIFEST,
    ab_parser,
    compile_programs,
    finish_build,
    fmha_build_inputs,
    missing_manifest,
    run_and_record,
)
from fmha_ftz_sass_check import fmha_kernel_opcodes

from kernelpilot.toolchain import tool_version

#: (kind, workload, config, periods): the head-dim-64 prefill winners (H100: 192x128 with three MMA
#: warpgroups; H200: 128x128 longest-first) over several periods, and the head-dim-128 winner, where the
#: tensor cores take twice the exponentials' time, once
DEFAULT_CASES = (
    ("fa_prefill", "gpt_oss_20b_prefill_4k", {"tile": [192, 128, 64], "schedule": "cooperative", "warpgroups": 3},
     (0, 8, 4, 3, 2)),
    ("fa_prefill", "gpt_oss_20b_prefill_4k", {"tile": [128, 128, 64], "schedule": "cooperative", "longest_first": True},
     (0, 4, 3)),
    ("fa_prefill", "llama3_8b_prefill_4k", {"tile": [128, 128, 128], "schedule": "cooperative", "longest_first": True},
     (0, 4)),
)  # fmt: skip
BASELINE = "ex0"


def build(folder: Path, cutlass_dir: str, jobs: int) -> int:
    """Render every (case, period) as the tuner renders it and build what ``folder`` lacks."""
    folder.mkdir(parents=True, exist_ok=True)
    ks, probs = kernels(), problems()
    inputs = fmha_build_inputs("fa_prefill", cutlass_dir)
    if inputs is None:
        return 1
    recipe, includes, flags = inputs
    cases, todo = [], []
    for i, (kind, workload, config, periods) in enumerate(DEFAULT_CASES):
        kernel, problem = ks[kind], probs[kind][workload]
        argv, _ = kernel.run_command(Path("BINARY"), problem, {})
        binaries = {}
        for period in periods:
            ((_, text),) = kernel.render(
                {**config, "exp2_emulation": period}, problem, "sm90"
            ).sources.items()
            name = f"case{i}_ex{period}"
            source = folder / f"{name}.cu"
            source.write_text(text)
            binaries[f"ex{period}"] = name
            if not (folder / name).exists():
                todo.append((source, flags, folder / name))
        cases.append(
            {"kind": kind, "workload": workload, "config": config, "args": argv[1:], "binaries": binaries}
        )

    errors = compile_programs(todo, includes, jobs)
    manifest = {
        "nvcc": tool_version("nvcc"),
        "cutlass": recipe.library_version,
        "flags": list(flags),
        "cases": cases,
    }
    return finish_build(folder, manifest, len(todo), errors)


SASS_OPCODES = ("MUFU", "FFMA", "FADD", "FMNMX", "LEA", "IADD3", "HGMMA")


def sass_record(folder: Path) -> dict:
    """Per case and period: the FMHA kernel's opcode counts (cuobjdump of the built program) and the total."""
    manifest = json.loads((folder / MANIFEST).read_text())
    rows = []
    for case in manifest["cases"]:
        counts = {}
        for label, name in case["binaries"].items():
            _, ops = fmha_kernel_opcodes(folder / name)
            counts[label] = {"instructions": sum(ops.values()), **{op: ops.get(op, 0) for op in SASS_OPCODES}}
        rows.append({**{k: case[k] for k in ("kind", "workload", "config")}, "fmha_kernel": counts})
    return {
        "what": "SASS opcode counts of the FMHA kernel in each program of fmha_exp2_ab.py (exp2_emulation = k: "
        "every k-th softmax exponential on the FMA pipe; ex0 = none), read on a CPU with cuobjdump",
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python benchmarks/fmha_exp2_ab.py sass --dir DIR --out fmha_exp2_sass.json",
        "built_with": {key: manifest[key] for key in ("nvcc", "cutlass", "flags")},
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    ap, sub = ab_parser(__doc__.splitlines()[0], "render and build every period of every case into --dir",
                        "time the periods side by side (GPU)")  # fmt: skip
    c = sub.add_parser("sass", help="count the FMHA kernel's opcodes of every built program (CPU)")
    c.add_argument("--dir", required=True)
    c.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    folder = Path(args.dir)
    if args.mode == "build":
        return build(folder, args.cutlass_dir, args.jobs)
    if missing_manifest(folder):
        return 2
    if args.mode == "sass":
        Path(args.out).write_text(json.dumps(sass_record(folder), indent=1) + "\n")
        return 0
    return run_and_record(
        args,
        "fmha_exp2_ab.py",
        BASELINE,
        "FMHA programs with every k-th softmax exponential on the FMA pipe (exp2_emulation = k) against "
        "the same tile without (ex0), alternating order per round, each run checked; speedup = median ms of "
        "ex0 / median ms of exk",
    )


if __name__ == "__main__":
    raise SystemExit(main())
