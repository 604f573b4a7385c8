"""Whether the ptr-array grouped GEMM kernel's k-block loops differ from the dense kernel's, read from SASS.

On the workloads of few large GEMMs the grouped kernel runs behind a ``torch.mm`` loop
(``docs/tile_tuner.md``).  ``benchmarks/grouped_vs_dense_probe.py build`` compiles the same tile
(128x256x64, cooperative, cluster 1x1) as the grouped kernel and as the dense kernel.  This disassembles
both programs (cuobjdump from the CUDA toolkit or Triton's wheel) and compares, per warp role, the
innermost loop around its k-block work: the consumers' loop around the WGMMA instructions (HGMMA) and the
producer's loop around the TMA loads (UTMALDG), by opcode.  It also counts, over each whole kernel, the
instructions that manage TMA descriptors and order memory, which is where a ptr-array kernel does extra
work when a CTA moves to another group's tile.  No GPU needed.

    python benchmarks/grouped_vs_dense_probe.py build --dir .kp-grouped-dense
    python benchmarks/grouped_dense_loops_sass.py --dir .kp-grouped-dense \
        --out benchmarks/results/grouped_dense_loops_sass.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
from collections import Counter
from pathlib import Path

from kernelpilot.dsl_plugins.cuda.sass import find_cuobjdump, functions_sass, innermost_loop, instructions

#: program file in the probe's folder -> what it is
PROGRAMS = {"grouped": "ptr-array grouped kernel", "dense_rc": "dense kernel (stream-K build)"}
#: warp role -> the opcode its k-block loop is found by
LOOPS = {"consumer (WGMMA)": "HGMMA", "producer (TMA loads)": "UTMALDG"}
#: whole-kernel opcodes that manage TMA descriptors or order memory
DESCRIPTOR_OPS = ("UTMACCTL", "UTMACMDFLUSH", "FENCE", "MEMBAR", "CCTL")


def full_opcode(instruction: str) -> str:
    """``@!P0 SYNCS.ARRIVE.TRANS64 RZ, [R3], RZ`` -> ``SYNCS.ARRIVE.TRANS64`` (modifiers kept)."""
    words = instruction.split()
    return words[1] if words[0].startswith("@") else words[0]


def gemm_kernel(sass: str) -> tuple[str, str]:
    """The CUTLASS kernel's (name, SASS) among a program's functions (its checks are other kernels)."""
    found = [(name, text) for name, text in functions_sass(sass).items() if "cutlass13device_kernel" in name]
    if len(found) != 1:
        raise RuntimeError(f"expected one cutlass::device_kernel, found {len(found)}")
    return found[0]


def describe(sass: str) -> dict:
    """Per role, the loop's length and opcodes; over the kernel, the descriptor / fence opcodes."""
    name, text = gemm_kernel(sass)
    loops = {}
    for role, opcode in LOOPS.items():
        body = innermost_loop(text, opcode)
        loops[role] = {"instructions": len(body), "opcodes": dict(Counter(full_opcode(i) for i in body))}
    whole = Counter(full_opcode(line) for _, line in instructions(text))
    return {
        "kernel": name[:120],
        "instructions": sum(whole.values()),
        "loops": loops,
        "descriptor_and_fence_ops": {
            op: n for op, n in sorted(whole.items()) if op.startswith(DESCRIPTOR_OPS)
        },
    }


def compare(a: dict, b: dict) -> dict:
    """Per role, the opcodes one loop has more of than the other (empty both ways: the same loop)."""
    out = {}
    for role in LOOPS:
        ca, cb = Counter(a["loops"][role]["opcodes"]), Counter(b["loops"][role]["opcodes"])
        out[role] = {"only_or_more_in_grouped": dict(ca - cb), "only_or_more_in_dense": dict(cb - ca)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="folder built by grouped_vs_dense_probe.py build")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    folder = Path(args.dir)
    manifest = json.loads((folder / "manifest.json").read_text())
    tool = str(find_cuobjdump())
    kernels = {}
    for program, what in PROGRAMS.items():
        sass = subprocess.run(
            [tool, "-sass", str(folder / program)], check=True, capture_output=True, text=True
        )
        kernels[program] = {"what": what, **describe(sass.stdout)}
    record = {
        "what": __doc__.splitlines()[0],
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python benchmarks/grouped_dense_loops_sass.py --dir DIR --out grouped_dense_loops_sass.json",
        "build": {
            key: manifest[key] for key in ("nvcc", "cutlass", "layout", "grouped_config", "dense_config")
        },
        "kernels": kernels,
        "loop_differences": compare(kernels["grouped"], kernels["dense_rc"]),
    }
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    for role, diff in record["loop_differences"].items():
        sizes = [kernels[p]["loops"][role]["instructions"] for p in PROGRAMS]
        print(f"{role}: {sizes[0]} / {sizes[1]} instructions (grouped / dense); differences {diff}")
    for program in PROGRAMS:
        print(program, kernels[program]["descriptor_and_fence_ops"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
