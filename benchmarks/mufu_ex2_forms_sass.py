"""How many MUFU instructions each form of the exponential costs on sm_90a, read from SASS on a CPU.

The FMHA softmax at head dim 64 takes one MUFU.EX2 (16 per SM per cycle) per score, about the time of the
score's two GEMMs on the tensor cores, so an exponential form that computed two results per MUFU
instruction would halve that share.  PTX has two-lane forms, ``ex2.approx.f16x2`` and
``ex2.approx.ftz.bf16x2`` (sm_90).  This compiles one kernel per form with the FMHA programs' nvcc flags
(``-arch=sm_90a -ftz=true``), each computing the same number of exponential results, and counts the MUFU
instructions in its SASS (cuobjdump from the CUDA toolkit or Triton's wheel).

    python benchmarks/mufu_ex2_forms_sass.py --out benchmarks/results/mufu_ex2_forms_sass.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from kernelpilot.dsl_plugins.cuda.sass import find_cuobjdump
from kernelpilot.toolchain import tool_version

#: results per thread each kernel computes (8 words of two 16-bit lanes, or 16 floats)
RESULTS = 16
#: a two-lane form: each asm statement computes two 16-bit results in one 32-bit word
_TWO_LANE = """
__global__ void k(const unsigned* x, unsigned* y) {
  int i = threadIdx.x;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    unsigned out;
    asm("OP %0, %1;" : "=r"(out) : "r"(x[i * 8 + j]));
    y[i * 8 + j] = out;
  }
}"""
FORMS = {
    "exp2f (fp32, -ftz)": """
__global__ void k(const float* x, float* y) {
  int i = threadIdx.x;
#pragma unroll
  for (int j = 0; j < 16; ++j) y[i * 16 + j] = exp2f(x[i * 16 + j]);
}""",
    **{op: _TWO_LANE.replace("OP", op) for op in ("ex2.approx.f16x2", "ex2.approx.ftz.bf16x2")},
}
FLAGS = ("-arch=sm_90a", "-O3", "-ftz=true")
_MUFU = re.compile(r"\bMUFU\.[A-Z0-9_.]+")


def count_form(source: str, work: Path, name: str) -> dict:
    cu, cubin = work / f"{name}.cu", work / f"{name}.cubin"
    cu.write_text(source)
    subprocess.run(["nvcc", *FLAGS, "-cubin", "-o", str(cubin), str(cu)], check=True, capture_output=True)
    sass = subprocess.run(
        [str(find_cuobjdump()), "-sass", str(cubin)], check=True, capture_output=True, text=True
    )
    mufu = Counter(_MUFU.findall(sass.stdout))
    return {"mufu": dict(mufu), "mufu_per_result": sum(mufu.values()) / RESULTS}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        forms = {form: count_form(src, Path(tmp), f"form{i}") for i, (form, src) in enumerate(FORMS.items())}
    record = {
        "what": __doc__.splitlines()[0],
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python benchmarks/mufu_ex2_forms_sass.py --out benchmarks/results/mufu_ex2_forms_sass.json",
        "nvcc": tool_version("nvcc"),
        "flags": list(FLAGS),
        "results_per_thread": RESULTS,
        "forms": forms,
    }
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    for form, row in forms.items():
        print(f"{form}: {row['mufu_per_result']:.2f} MUFU per result {row['mufu']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
