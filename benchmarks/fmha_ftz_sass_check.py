"""What ``-ftz=true`` does to the FMHA kernels' machine code, read on a CPU (no GPU needed).

Each selected (workload, config) of ``cuda_kinds_common.py`` is rendered as the tuner renders it,
compiled to a cubin twice, with the grouped programs' flags (the FMHA build before template 3) and with
``FMHA_NVCC_FLAGS`` (those plus ``-ftz=true``), and the FMHA kernel's SASS opcodes are counted
(``kernelpilot.dsl_plugins.cuda.sass``): MUFU (the exponentials), the FSETP / FMUL of the subnormal path
around each one, the total, and ptxas's registers and spills.  Default selection: the confirmed H200
winners of the library-default attention call (head dims 64 and 128, prefill and decode)::

    python benchmarks/fmha_ftz_sass_check.py --jobs 2 --out benchmarks/results/fmha_ftz_sass_check.json

It says how many instructions the flag removes, not how much time: the speed is measured on a GPU.
CUTLASS headers with ``examples/88_hopper_fmha``: ``--cutlass-dir`` or ``CUTLASS_DIR``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cuda_kinds_common import kernels, problems
from hw_models_sm90_compile_check import parse_log  # the ptxas -v reader of the dense compile check

from kernelpilot.dsl_plugins.cuda.fmha import FMHA_NVCC_FLAGS, TEMPLATE_VERSIONS
from kernelpilot.dsl_plugins.cuda.grouped_gemm import NVCC_FLAGS
from kernelpilot.dsl_plugins.cuda.sass import cubin_opcode_counts
from kernelpilot.errors import ToolMissingError
from kernelpilot.tile_tuner.kernel_api import BuildRecipe
from kernelpilot.toolchain import tool_version

#: (kind, workload, config): the confirmed winners of kinds_default_h200_verdict.json
DEFAULT_CASES = (
    ("fa_prefill", "gpt_oss_20b_prefill_4k", {"tile": [128, 128, 64], "schedule": "cooperative", "longest_first": True}),
    ("fa_prefill", "qwen3_32b_prefill_8k", {"tile": [128, 128, 128], "schedule": "cooperative", "longest_first": True}),
    ("fa_decode", "gpt_oss_20b_decode_b64_kv4k", {"tile": [64, 64, 64], "schedule": "tma"}),
    ("fa_decode", "llama3_8b_decode_b64_kv4k", {"tile": [64, 64, 128], "schedule": "tma"}),
)  # fmt: skip
FLAG_SETS = {"without_ftz": NVCC_FLAGS, "with_ftz": FMHA_NVCC_FLAGS}
OPCODES = ("MUFU", "FSETP", "FMUL", "FFMA", "FADD", "FMNMX", "HGMMA")


def render_cases(folder: Path, cutlass_dir: str) -> tuple[BuildRecipe, list[dict]]:
    """The FMHA build recipe and every case of DEFAULT_CASES rendered as the tuner renders it into
    ``folder/case<i>.cu`` (index, kind, workload, config, kernel, problem, source); ToolMissingError without
    CUTLASS's example 88."""
    ks, probs = kernels(), problems()
    recipe = ks["fa_prefill"].build_recipe("sm90", {"cutlass_dir": cutlass_dir or None})
    cases = []
    for i, (kind, workload, config) in enumerate(DEFAULT_CASES):
        kernel, problem = ks[kind], probs[kind][workload]
        ((_, text),) = kernel.render(config, problem, "sm90").sources.items()
        source = folder / f"case{i}.cu"
        source.write_text(text)
        cases.append({"index": i, "kind": kind, "workload": workload, "config": config, "kernel": kernel,
                      "problem": problem, "source": source})  # fmt: skip
    return recipe, cases


def fmha_kernel_opcodes(binary: Path) -> tuple[str, dict[str, int]]:
    """The FMHA kernel's name and SASS opcode counts in a built program or cubin (its other kernels are the
    program's fills, reference and check)."""
    return next((f, c) for f, c in cubin_opcode_counts(binary).items() if "fmha" in f.lower())


def compile_cubin(source: Path, flags: tuple[str, ...], includes: list[str], cubin: Path) -> dict:
    """nvcc -cubin with ``flags`` (ptxas's report forced on, to read registers and spills)."""
    report = [] if "-v" in flags else ["-Xptxas", "-v"]
    t0 = time.time()
    done = subprocess.run(["nvcc", *flags, *report, *includes, "-cubin", "-o", str(cubin), str(source)],
                          capture_output=True, text=True)  # fmt: skip
    text = done.stdout + done.stderr
    if done.returncode != 0:
        return {"rc": done.returncode, "errors": [ln for ln in text.splitlines() if " error" in ln][:5]}
    name, ops = fmha_kernel_opcodes(cubin)
    log = parse_log(text)
    return {
        "rc": 0,
        "wall_s": round(time.time() - t0, 1),
        "kernel": name,
        "instructions": sum(ops.values()),
        **{op: ops[op] for op in OPCODES},
        "registers": log["registers"],
        "spill_bytes": log["spill_bytes"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cutlass-dir", default=os.environ.get("CUTLASS_DIR", ""))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kp-ftz-sass-") as tmp:
        try:
            recipe, cases = render_cases(Path(tmp), args.cutlass_dir)
        except ToolMissingError as exc:
            print(f"error: {exc} (--cutlass-dir or CUTLASS_DIR)", file=sys.stderr)
            return 1
        includes = [f"-I{p}" for p in recipe.include_dirs]
        jobs = [(c["index"], label, c["source"], flags) for c in cases for label, flags in FLAG_SETS.items()]
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            built = list(
                pool.map(
                    lambda j: compile_cubin(j[2], j[3], includes, Path(tmp) / f"{j[0]}_{j[1]}.cubin"), jobs
                )
            )
    rows = []
    for i, (kind, workload, config) in enumerate(DEFAULT_CASES):
        got = {label: res for (j, label, _, _), res in zip(jobs, built, strict=True) if j == i}
        row = {"kind": kind, "workload": workload, "config": config, **got}
        if all(r["rc"] == 0 for r in got.values()):
            row["instructions_ratio"] = round(
                got["with_ftz"]["instructions"] / got["without_ftz"]["instructions"], 3
            )
        rows.append(row)
    record = {
        "what": "the FMHA kernel's SASS with and without -ftz=true (opcode counts of cuobjdump -sass, ptxas "
        "registers and spills), per confirmed H200 winner; instruction counts, not times",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": f"python benchmarks/fmha_ftz_sass_check.py --jobs {args.jobs} --out benchmarks/results/{Path(args.out).name}",
        "nvcc": tool_version("nvcc"),
        "cutlass": recipe.library_version,
        "fmha_template_version": TEMPLATE_VERSIONS["fa_prefill"],
        "flags": {label: list(flags) for label, flags in FLAG_SETS.items()},
        "rows": rows,
    }  # fmt: skip
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    for row in rows:
        a, b = row["without_ftz"], row["with_ftz"]
        if a["rc"] or b["rc"]:
            print(f"{row['workload']}: build failed {a.get('errors') or b.get('errors')}")
            continue
        print(f"{row['workload']:30s} {json.dumps(row['config'])}: instructions {a['instructions']} -> "
              f"{b['instructions']} ({row['instructions_ratio']}), MUFU {a['MUFU']} -> {b['MUFU']}, "
              f"FSETP {a['FSETP']} -> {b['FSETP']}, FMUL {a['FMUL']} -> {b['FMUL']}, "
              f"registers {a['registers']} -> {b['registers']}, spills {a['spill_bytes']} -> {b['spill_bytes']}")  # fmt: skip
    return 0 if all("instructions_ratio" in row for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
