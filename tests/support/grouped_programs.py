"""Rendered grouped / MoE programs on the CPU: the width rule a mixed-width program applies, run as C++,
and a real nvcc compile of a program.

Why shared: the ptr-array and the per-group mixed-width programs both pick each group's width with the
program's ``width_class``, and their tests check it against the model's ``width_for_tokens`` the same
way (that function compiled alone with g++, its choice printed for every token count); both families'
tests also compile one program with the tuner's nvcc flags.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from kernelpilot.dsl_plugins.cuda.grouped_gemm import NVCC_FLAGS, GroupedGemmKernel


def program_width_rule(source: str, work: Path, max_tokens: int = 2048) -> list[int]:
    """The width ``source``'s ``width_class`` gives each token count from 1 to ``max_tokens``."""
    decls = re.search(
        r"constexpr int kNumWidths = .*?;\nconstexpr int kWidths\[kNumWidths\] = .*?;\n", source
    )
    body = re.search(r"static int width_class\(int tokens\) \{.*?\n\}\n", source, re.S)
    assert decls and body, "the program declares no width_class / kWidths"
    harness = work / "width_class.cpp"
    harness.write_text(
        "#include <cstdio>\n" + decls.group(0) + body.group(0)
        + f"int main() {{ for (int t = 1; t <= {max_tokens}; ++t) printf(\"%d\\n\", kWidths[width_class(t)]); }}\n"
    )  # fmt: skip
    exe = work / "width_class"
    subprocess.run(["g++", "-std=c++17", str(harness), "-o", str(exe)], check=True, timeout=120)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    return [int(x) for x in out]


def compile_for_sm90a(nvcc: str, source: str, work: Path, cutlass_dir: Path) -> None:
    """Compiles ``source`` (one object, no link) with the grouped programs' nvcc flags less ptxas's
    verbose output, against the CUTLASS headers in ``cutlass_dir``; fails with nvcc's last output."""
    src = work / "program.cu"
    src.write_text(source)
    recipe = GroupedGemmKernel().build_recipe("sm90", {"cutlass_dir": str(cutlass_dir)})
    flags = [f for f in NVCC_FLAGS if f not in ("-Xptxas", "-v")]
    obj = work / "program.o"
    r = subprocess.run(
        [nvcc, *flags, *(f"-I{d}" for d in recipe.include_dirs), "-c", str(src), "-o", str(obj)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    assert obj.stat().st_size > 0
