"""Compile-check sm90 configs the hardware model accepts (no GPU needed): build, read ptxas, compare stages.

For each config this renders the project's CUTLASS GEMM program (dsl_plugins/cuda/gemm.py
``render_source``), compiles it with nvcc for sm_90a (optionally under ``flock --lock FILE``, so builds of several
processes on a small machine run one at a time), and records
whether it compiled, the spill bytes ptxas reports for the GEMM kernel, and the mainloop stage count
CUTLASS chose (from the kernel's mangled name, ``MainloopSm90TmaGmmaWarpSpecialized<Stages,...>``)
next to the model's prediction.  Writes ``--out`` (default
benchmarks/results/hw_models_sm90_compile_check.json).

    python benchmarks/hw_models_sm90_compile_check.py [--cutlass DIR] [--lock FILE] [--workdir DIR]
        [--reuse] [--only NAME ...] [--out FILE]

CUTLASS headers: ``--cutlass``, else ``CUTLASS_DIR``, ``./.deps/cutlass`` or an installed
``nvidia-cutlass`` wheel (``kernelpilot.toolchain.find_headers``).

``--reuse`` parses logs already in ``--workdir`` (built by an earlier run with the same command)
instead of compiling again; a config without a log is built.  ``--merge`` (with ``--only``) keeps the
other rows of an existing ``--out`` record and adds this run's command to its ``commands``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from kernelpilot.dsl_plugins.cuda.gemm import render_source
from kernelpilot.hw_models.sm90.gemm import auto_stages
from kernelpilot.hw_models.sm90.model import Sm90Model
from kernelpilot.toolchain import HeaderTree, find_headers, tool_version

REPO = Path(__file__).resolve().parents[1]
CONFIGS = {
    "c128x192x64_coop": {"tile": [128, 192, 64], "cluster": [1, 1], "schedule": "cooperative"},
    "c256x64x64_pp": {"tile": [256, 64, 64], "cluster": [1, 1], "schedule": "pingpong"},
    "c64x64x64_pp_2x2": {"tile": [64, 64, 64], "cluster": [2, 2], "schedule": "pingpong"},
    "c128x96x64_pp": {"tile": [128, 96, 64], "cluster": [1, 1], "schedule": "pingpong"},
    "c128x128x128_coop_2x1": {"tile": [128, 128, 128], "cluster": [2, 1], "schedule": "cooperative"},
    "c128x256x128_coop_2x1": {"tile": [128, 256, 128], "cluster": [2, 1], "schedule": "cooperative"},
    "c64x256x64_ws_1x2": {"tile": [64, 256, 64], "cluster": [1, 2], "schedule": "ws"},
    # stage-count discriminators for the exact epilogue SharedStorage: the old estimate
    # (D bytes + 16 B per D stage) predicted 15 and 37 stages, the exact layout 14 and 36
    "c128x96x32_coop": {"tile": [128, 96, 32], "cluster": [1, 1], "schedule": "cooperative"},
    "c64x32x32_pp": {"tile": [64, 32, 32], "cluster": [1, 1], "schedule": "pingpong"},
    # the accumulator limit (sm90.acc_registers): 192 fp32 registers per MMA thread in each schedule
    "c256x192x64_coop": {"tile": [256, 192, 64], "cluster": [1, 1], "schedule": "cooperative"},
    "c128x192x64_pp": {"tile": [128, 192, 64], "cluster": [1, 1], "schedule": "pingpong"},
    "c128x192x64_ws": {"tile": [128, 192, 64], "cluster": [1, 1], "schedule": "ws"},
}
# nvcc's -O sets the HOST optimisation level only; device code is optimised by ptxas at its default -O3
# either way, so registers and spills are those of the production build (dsl_plugins/cuda/gemm.py
# NVCC_FLAGS).  hw_models_sm90_rejected_compile.py builds with this same command.
NVCC = [
    "nvcc",
    "-std=c++17",
    "-O1",
    "-DNDEBUG",
    "-gencode",
    "arch=compute_90a,code=sm_90a",
    "--expt-relaxed-constexpr",
    "-Xptxas=-v",
]


def command(name: str, cutlass: Path | str, lock: str | None) -> list[str]:
    """nvcc for one program; ``cutlass`` is the header tree's root (``include/``, ``tools/util/include``)."""
    return [
        *(["flock", lock] if lock else []),
        *NVCC,
        f"-I{cutlass}/include",
        f"-I{cutlass}/tools/util/include",
        "-o",
        f"{name}.bin",
        f"{name}.cu",
    ]


def find_cutlass(explicit: str | None) -> HeaderTree:
    """The CUTLASS headers to build against; exits 2 naming the flag when there are none."""
    tree = find_headers("cutlass", explicit)
    if explicit and (tree is None or tree.source != "explicit path"):
        print(f"error: --cutlass {explicit}: no CUTLASS header tree (include/cutlass) there", file=sys.stderr)
        raise SystemExit(2)
    if tree is None:
        print("error: no CUTLASS headers found: pass --cutlass DIR or set CUTLASS_DIR", file=sys.stderr)
        raise SystemExit(2)
    return tree


def add_build_flags(ap: argparse.ArgumentParser) -> None:
    """Flags shared with hw_models_sm90_rejected_compile.py (both records use the same build)."""
    ap.add_argument("--cutlass", help="CUTLASS header tree (default: CUTLASS_DIR, ./.deps/cutlass, wheel)")
    ap.add_argument(
        "--lock",
        default=os.environ.get("KERNELPILOT_BUILD_LOCK"),
        help="run each nvcc under flock FILE (default: $KERNELPILOT_BUILD_LOCK, else no lock)",
    )
    ap.add_argument(
        "--reuse", action="store_true", help="parse logs already in --workdir instead of building"
    )
    ap.add_argument("--only", nargs="*", default=None)


def parse_log(text: str) -> dict:
    """Spills, registers, stages and WGMMA atoms of the GEMM kernel entry (``cutlass13device_kernel``) from
    ptxas -v output; dense (``MainloopSm90TmaGmma...``) and ptr-array (``MainloopSm90ArrayTmaGmma...``)
    kernels alike.  ``wgmma_atoms``: the N of every ``MMA_64xNx16`` atom in the kernel's name (one per tile
    unless the tile runs as several narrow WGMMAs)."""
    spills = registers = stages = None
    atoms: list[int] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "Function properties for _ZN7cutlass13device_kernel" in line and i + 1 < len(lines):
            m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", lines[i + 1])
            if m:
                spills = int(m.group(1)) + int(m.group(2))
            s = re.search(r"MainloopSm90(?:Array)?TmaGmmaWarpSpecializedILi(\d+)E", line)
            if s:
                stages = int(s.group(1))
            atoms = sorted({int(n) for n in re.findall(r"MMA_64x(\d+)x\d+_F32", line)})
            for follow in lines[i + 1 : i + 4]:
                r = re.search(r"Used (\d+) registers", follow)
                if r:
                    registers = int(r.group(1))
    return {"spill_bytes": spills, "stages": stages, "registers": registers, "wgmma_atoms": atoms}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default="/tmp/kp-sm90-compile-check", help="sources, logs, binaries")
    ap.add_argument(
        "--out", type=Path, default=REPO / "benchmarks" / "results" / "hw_models_sm90_compile_check.json"
    )
    add_build_flags(ap)
    ap.add_argument("--merge", action="store_true", help="keep the other rows of an existing --out record")
    args = ap.parse_args()
    tree = find_cutlass(args.cutlass)
    cutlass = tree.include.parent
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    model = Sm90Model()
    rows = []
    for name, raw in CONFIGS.items():
        if args.only and name not in args.only:
            continue
        cfg = model.parse_config({"kernel": "gemm", "dtype": "bf16", **raw})
        check = model.check(cfg, {"M": 4096, "N": 4096, "K": 4096, "layout": "rr"})
        full = {**cfg.as_dict(), "epilogue": "tma"}
        (work / f"{name}.cu").write_text(render_source(full, "bf16", "rr"))
        log = work / f"{name}.log"
        seconds = None
        if not (args.reuse and log.exists() and log.stat().st_size > 0):
            start = time.time()
            with log.open("w") as fh:
                argv = command(name, cutlass, args.lock)
                rc = subprocess.run(argv, cwd=work, stdout=fh, stderr=subprocess.STDOUT).returncode
            seconds = round(time.time() - start, 1)
        else:
            rc = 0 if (work / f"{name}.bin").exists() else 1
        parsed = parse_log(log.read_text(errors="replace"))
        rows.append(
            {
                "name": name,
                "label": cfg.label(),
                "config": cfg.as_dict(),
                "model_valid": check.valid,
                "model_predicted_stages": cfg.stages or auto_stages(cfg),
                "compiled": rc == 0,
                "ptxas_spill_bytes": parsed["spill_bytes"],
                "cutlass_stages": parsed["stages"],
                "build_seconds_incl_lock_wait": seconds,
            }
        )
        print(json.dumps(rows[-1]))
    dest = args.out
    this_command = "python benchmarks/hw_models_sm90_compile_check.py " + " ".join(sys.argv[1:])
    commands = [this_command]
    if args.merge and dest.exists():
        old = json.loads(dest.read_text())
        rerun = {r["name"] for r in rows}
        rows = [r for r in old["results"] if r["name"] not in rerun] + rows
        commands = [*old.get("commands", [old["command"]]), this_command]
    out = {
        "what": "sm90 configs accepted by the hardware model, compiled locally for sm_90a (no GPU run)",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": "CPU build machine (2 cores), no GPU",
        "nvcc": tool_version("nvcc"),
        "cutlass": f"CUTLASS {tree.version} headers (found via {tree.source})",
        "command": this_command,
        "commands": commands,
        "nvcc_command": " ".join(command("<name>", "$CUTLASS_DIR", args.lock)),
        "results": rows,
    }
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {dest}")
    bad = [r for r in rows if r["model_valid"] and (not r["compiled"] or (r["ptxas_spill_bytes"] or 0) > 0)]
    mismatched = [
        r for r in rows if r["cutlass_stages"] and r["cutlass_stages"] != r["model_predicted_stages"]
    ]
    print(f"{len(rows)} configs, {len(bad)} model disagreements, {len(mismatched)} stage-count mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
