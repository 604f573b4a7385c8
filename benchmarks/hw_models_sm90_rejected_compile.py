"""Compile-check the sm90 configs the hardware model REJECTS (no GPU needed): what does the toolchain do?

What do the configs the model rejects actually do?  Without a GPU, this is what is measurable: every ``rejected`` entry of benchmarks/sm90_model_validation_configs.yaml is
rendered through the project's real CUTLASS GEMM template (dsl_plugins/cuda/gemm.py
``render_source``; the mismatched-epilogue entries use the explicit ``tma_coop`` / ``tma_ws``
epilogues) and compiled with nvcc for sm_90a, one at a time (optionally under ``flock --lock FILE``).  Per config
it records the rule(s) the model reported, the model's prediction, and the observed outcome: the
compiler's error (static_assert text), or ptxas's registers / stack / spill bytes for the GEMM
kernel.  A config that compiles without spills is recorded as exactly that: its failure mode
(wrong results, launch failure, slowness) needs a GPU run and is NOT measured here.

Writes ``--out`` (default benchmarks/results/hw_models_sm90_rejected_compile.json) after every config,
so an interrupted run keeps what it built; ``--reuse`` parses logs already in ``--workdir``.

    python benchmarks/hw_models_sm90_rejected_compile.py [--cutlass DIR] [--lock FILE] [--workdir DIR]
        [--validation YAML] [--reuse] [--only LABEL ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

from kernelpilot.dsl_plugins.cuda.gemm import render_source
from kernelpilot.hw_models.sm90.gemm import auto_stages, smem_bytes
from kernelpilot.hw_models.sm90.model import Sm90Model
from kernelpilot.toolchain import tool_version

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.resolve()))
# the nvcc command of the accepted-config check: both records are built with the same flags
from hw_models_sm90_compile_check import add_build_flags, command, find_cutlass  # noqa: E402

VALIDATION = HERE / "sm90_model_validation_configs.yaml"
DEST = HERE / "results" / "hw_models_sm90_rejected_compile.json"
KERNEL_PREFIX = "_ZN7cutlass13device_kernel"
#: rules whose violation CUTLASS (or the project template) refuses at compile time
COMPILE_ERROR_RULES = {
    "sm90.tile_m_multiple",
    "sm90.tile_n_multiple",
    "sm90.tile_bounds",
    "sm90.coop_tile_m",
    "sm90.streamk_schedule",
    "sm90.cluster_multicast",
    # CUTLASS itself compiles it and initialize() fails at run time; gemm_sm90.cu.j2 static_asserts
    # sizeof(SharedStorage) <= 232448 first ("kernel shared storage exceeds the 227 KB sm90 limit")
    "sm90.smem_capacity",
}
#: what the H200 did with the configs that compile, measured earlier and described in
#: docs/reference/sm90_h200_measurements.md (section named per row); NOT measured by this script
REFERENCE_RUNS = {
    "256x256x64_c1x1_coop": "H200 8192^3: 26.73 ms = 41 TFLOP/s vs 556-689 for legal coop tiles; ptxas 4.7 KB "
    "spills (docs/reference/sm90_h200_measurements.md, accumulator register spills)",
    "128x256x64_c1x1_pp": "H200 8192^3: 25.64 ms = 43 TFLOP/s vs 556-689; ptxas 4.7 KB spills "
    "(docs/reference/sm90_h200_measurements.md, accumulator register spills)",
    "128x128x64_c1x1_pp_tma_coop": "H200: runs (8192^3 2.025 ms) but verification fails: 318325 of 370240 "
    "outputs wrong on 712x520x264, max error 34.6 (docs/reference/sm90_h200_measurements.md, mismatched "
    "mainloop and epilogue schedules)",
}


def expected_class(rules: list[str], schedule: str) -> str:
    """The compile outcome the model's rules imply (what the recorded outcome must match)."""
    if COMPILE_ERROR_RULES & set(rules):
        return "compile_error"
    if "sm90.acc_registers" in rules:
        return "compiles_with_spills"
    if "sm90.epilogue_pairing" in rules:
        # coop + TmaWarpSpecialized epilogue: static_assert 'MMA_TILE_M must divide EPI_TILE_M';
        # pingpong/ws + cooperative epilogue: compiles, wrong results at run time
        return "compile_error" if schedule == "cooperative" else "compiles_cleanly"
    return "unknown"


def parse_ptxas(text: str) -> dict:
    """Registers, stack frame and spill bytes of the GEMM kernel entry from ``ptxas -v`` output.

    ptxas prints, per entry: ``Function properties for <mangled>`` followed by ``N bytes stack frame,
    S bytes spill stores, L bytes spill loads`` and then ``Used R registers, ...``."""
    out: dict = {
        "registers": None,
        "stack_frame_bytes": None,
        "spill_store_bytes": None,
        "spill_load_bytes": None,
        "cutlass_stages": None,
    }
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if f"Function properties for {KERNEL_PREFIX}" not in line:
            continue
        s = re.search(r"MainloopSm90TmaGmmaWarpSpecializedILi(\d+)E", line)
        if s:
            out["cutlass_stages"] = int(s.group(1))
        for follow in lines[i + 1 : i + 4]:
            m = re.search(
                r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", follow
            )
            if m:
                out["stack_frame_bytes"] = int(m.group(1))
                out["spill_store_bytes"] = int(m.group(2))
                out["spill_load_bytes"] = int(m.group(3))
            r = re.search(r"Used (\d+) registers", follow)
            if r:
                out["registers"] = int(r.group(1))
                break
        break
    return out


def parse_errors(text: str) -> list[str]:
    """The distinct compiler error messages (static_assert text first), without file paths."""
    seen: list[str] = []
    for line in text.splitlines():
        m = re.search(r"error:\s*(.*)$", line)
        if not m:
            continue
        msg = m.group(1).strip()
        if msg and msg not in seen:
            seen.append(msg)
    seen.sort(key=lambda msg: 0 if "static assert" in msg or "static_assert" in msg else 1)
    return seen[:6]


def error_sites(text: str) -> list[str]:
    """``file(line)`` of the CUTLASS/CuTe headers where errors were reported (relative to include/)."""
    sites: list[str] = []
    for line in text.splitlines():
        m = re.search(r"include/((?:cutlass|cute)/[^\s(]+)\((\d+)\): error", line)
        if m:
            site = f"{m.group(1)}:{m.group(2)}"
            if site not in sites:
                sites.append(site)
    return sites[:6]


def outcome(compiled: bool, ptxas: dict, errors: list[str]) -> tuple[str, str]:
    """(class, sentence) of the observed compile outcome."""
    if not compiled:
        first = errors[0] if errors else "(no error line found in the log)"
        return "compile_error", f"does not compile: {first}"
    spills = (ptxas["spill_store_bytes"] or 0) + (ptxas["spill_load_bytes"] or 0)
    if spills:
        return (
            "compiles_with_spills",
            f"compiles; ptxas: {ptxas['registers']} registers, {ptxas['stack_frame_bytes']} B stack, "
            f"{ptxas['spill_store_bytes']} B spill stores, {ptxas['spill_load_bytes']} B spill loads",
        )
    return (
        "compiles_cleanly",
        f"compiles cleanly ({ptxas['registers']} registers, {ptxas['stack_frame_bytes']} B stack, 0 spills): "
        "the failure mode (wrong result / launch failure / slow) needs a GPU run, not measured",
    )


def load_rejected(path: Path = VALIDATION) -> list[dict]:
    return yaml.safe_load(path.read_text())["rejected"]


def build_one(model: Sm90Model, entry: dict, work: Path, reuse: bool, argv: list[str]) -> dict:
    cfg = model.parse_config(entry["config"])
    problem = {"M": 4096, "N": 4096, "K": 4096, "layout": "rr"}
    check = model.check(cfg, problem)
    name = entry["label"]
    (work / f"{name}.cu").write_text(render_source(cfg.as_dict(), "bf16", "rr"))
    log = work / f"{name}.log"
    rc_file = work / f"{name}.rc"
    seconds = None
    if not (reuse and rc_file.exists() and log.exists()):
        start = time.time()
        with log.open("w") as fh:
            rc = subprocess.run(argv, cwd=work, stdout=fh, stderr=subprocess.STDOUT).returncode
        seconds = round(time.time() - start, 1)
        rc_file.write_text(f"{rc} {seconds}\n")
    else:
        fields = rc_file.read_text().split()
        rc = int(fields[0])
        seconds = float(fields[1]) if len(fields) > 1 else None
    text = log.read_text(errors="replace")
    ptxas = parse_ptxas(text)
    errors = parse_errors(text) if rc else []
    klass, sentence = outcome(rc == 0, ptxas, errors)
    return {
        "label": name,
        "config": cfg.as_dict(),
        "model_valid": check.valid,
        "model_rules": sorted(set(check.rules())),
        "model_messages": [v.message for v in check.violations],
        "model_predicted": entry.get("predicted"),
        "model_acc_registers_per_thread": cfg.acc_registers,
        "model_predicted_stages": cfg.stages or auto_stages(cfg),
        "model_predicted_smem_bytes": smem_bytes(cfg),
        "nvcc_exit_code": rc,
        "compiled": rc == 0,
        "errors": errors,
        "error_sites": error_sites(text) if rc else [],
        **ptxas,
        "expected_class": expected_class(sorted(set(check.rules())), cfg.schedule),
        "observed_class": klass,
        "observed": sentence,
        "agrees_with_model": klass == expected_class(sorted(set(check.rules())), cfg.schedule),
        "reference_gpu_run": REFERENCE_RUNS.get(name),
        "build_seconds_incl_lock_wait": seconds,
        "built_at": dt.datetime.fromtimestamp(log.stat().st_mtime, dt.timezone.utc).isoformat(
            timespec="seconds"
        ),
    }


def write(rows: list[dict], args: argparse.Namespace, cutlass: str) -> None:
    out = {
        "what": "sm90 configs the hardware model REJECTS (validation set), rendered through the real CUTLASS "
        "GEMM template and compiled locally for sm_90a; no GPU run: run-time failure modes are not measured",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": "CPU build machine (2 cores), no GPU",
        "nvcc": tool_version("nvcc"),
        "cutlass": cutlass,
        "validation_set": f"{args.validation} (rejected)",
        "command": "python benchmarks/hw_models_sm90_rejected_compile.py " + " ".join(sys.argv[1:]),
        "parsed_with": "the same command"
        + (" plus --reuse (logs and exit codes of the builds at built_at, re-parsed)" if args.reuse else ""),
        "nvcc_command": " ".join(command("<label>", "$CUTLASS_DIR", args.lock)),
        "results": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default="/tmp/kp-sm90-rejected-compile", help="sources, logs, binaries")
    ap.add_argument(
        "--validation", type=Path, default=VALIDATION, help="validation set YAML (its rejected list)"
    )
    ap.add_argument("--out", type=Path, default=DEST)
    add_build_flags(ap)
    args = ap.parse_args()
    tree = find_cutlass(args.cutlass)
    cutlass = f"CUTLASS {tree.version} headers (found via {tree.source})"
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    model = Sm90Model()
    rows: list[dict] = []
    for entry in load_rejected(args.validation):
        if args.only and entry["label"] not in args.only:
            continue
        argv = command(entry["label"], tree.include.parent, args.lock)
        rows.append(build_one(model, entry, work, args.reuse, argv))
        print(json.dumps({k: rows[-1][k] for k in ("label", "model_rules", "observed")}), flush=True)
        write(rows, args, cutlass)
    disagree = [r["label"] for r in rows if not r["agrees_with_model"]]
    print(f"wrote {args.out}: {len(rows)} rejected configs, {len(disagree)} disagreements {disagree}")
    return 1 if disagree else 0


if __name__ == "__main__":
    raise SystemExit(main())
