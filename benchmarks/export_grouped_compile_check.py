"""Compile the exported grouped / MoE kernels of a tuning run on a CPU and read ptxas.

``kernelpilot export`` of the run's grouped and MoE documents (every tuned kernel kept), then each
selected translation unit of the export's ``csrc/grouped/`` compiled for sm_90a with the flags the
export's CMake part gives its grouped kernels, and its ptxas output read for the GEMM kernel entry:
spill bytes, registers, the WGMMA atom and the mainloop stages (``parse_log`` of
hw_models_sm90_compile_check.py).
This is the operator a user installs, not the tuning program: the swap-AB family's exported kernel
launches the swapped shapes and pointers from its own prepare kernel.  No GPU is needed::

    python benchmarks/export_grouped_compile_check.py \
        --runs benchmarks/results/kinds_swap_h100_moe_run_kinds.json \
               benchmarks/results/kinds_swap_h100_grouped_run_kinds.json \
        --only-swap --jobs 2 --out benchmarks/results/export_swap_compile_check.json

CUTLASS headers: ``--cutlass-dir`` or ``CUTLASS_DIR``.
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

from hw_models_sm90_compile_check import parse_log  # the ptxas -v reader of the dense compile check

# the grouped program's flags: the export builds its grouped kernels with exactly these, less ptxas's
# register report (core/export/cuda_project.py kind_parts), which this check keeps to read it
from kernelpilot.dsl_plugins.cuda.grouped_gemm import NVCC_FLAGS
from kernelpilot.toolchain import tool_version

REPO = Path(__file__).resolve().parents[1]


def split_runs(paths: list[str], dest: Path) -> list[Path]:
    """run_kinds.json (kind -> run document) into one run document per kind, as ``export`` takes them."""
    out = []
    for path in paths:
        for kind, run in json.loads(Path(path).read_text()).items():
            target = dest / f"{kind}.json"
            target.write_text(json.dumps(run))
            out.append(target)
    return out


def compile_one(src: Path, project: Path, cutlass: Path, obj: Path) -> dict:
    include = [f"-I{project / 'include'}", f"-I{cutlass / 'include'}", f"-I{cutlass / 'tools/util/include'}"]
    t0 = time.time()
    r = subprocess.run(["nvcc", *NVCC_FLAGS, *include, "-c", str(src), "-o", str(obj)],
                       capture_output=True, text=True)  # fmt: skip
    text = r.stdout + r.stderr
    return {
        "rc": r.returncode,
        "wall_s": round(time.time() - t0, 1),
        **parse_log(text),
        "errors": [ln for ln in text.splitlines() if " error" in ln][:5],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", required=True, help="run_kinds.json files of one tuning call")
    ap.add_argument("--cutlass-dir", default=os.environ.get("CUTLASS_DIR", ""))
    ap.add_argument("--only-swap", action="store_true", help="compile the swap-AB kernels only")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if not args.cutlass_dir:
        raise SystemExit("--cutlass-dir (or CUTLASS_DIR): the CUTLASS source tree with include/")
    cutlass = Path(args.cutlass_dir)
    with tempfile.TemporaryDirectory(prefix="kp-export-check-") as tmp:
        work = Path(tmp)
        runs = split_runs(args.runs, work)
        project = work / "proj"
        cmd = [sys.executable, "-m", "kernelpilot", "export", *map(str, runs), "--out", str(project),
               "--name", "kpcheck", "--no-bundle-cutlass", "--min-vendor-ratio", "0"]  # fmt: skip
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"export failed:\n{r.stderr[-3000:]}")
        doc = json.loads((project / "dispatch.json").read_text())
        kernels = [k for k in doc["grouped"]["kernels"] if k["config"].get("swap_ab") or not args.only_swap]
        served = {k["id"]: [e["origin"]["workload"] for e in doc["grouped"]["entries"] if e.get("kernel") == k["id"]]
                  for k in kernels}  # fmt: skip
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(
                lambda k: compile_one(project / "csrc" / "grouped" / f"{k['id']}.cu", project, cutlass, work / f"{k['id']}.o"),
                kernels,
            ))  # fmt: skip
    rows = [
        {"id": k["id"], "label": k["label"], "config": k["config"], "serves": served[k["id"]], **res}
        for k, res in zip(kernels, results, strict=True)
    ]
    record = {
        "what": "the exported grouped / MoE kernels of a tuning run compiled for sm_90a with the export's "
        "kernel flags; ptxas spills, registers, WGMMA atom and stages of each GEMM kernel entry",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python benchmarks/export_grouped_compile_check.py --runs "
        + " ".join(f"benchmarks/results/{Path(p).name}" for p in args.runs)
        + (" --only-swap" if args.only_swap else "")
        + f" --jobs {args.jobs} --out benchmarks/results/{Path(args.out).name}",
        "nvcc": tool_version("nvcc"),
        "nvcc_flags": list(NVCC_FLAGS),
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    for row in rows:
        print(f"{row['id']} {row['label']:32s} rc={row['rc']} spill={row['spill_bytes']} "
              f"regs={row['registers']} atoms={row['wgmma_atoms']} stages={row['stages']} {row['wall_s']} s")  # fmt: skip
    return 0 if all(row["rc"] == 0 for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
