"""Opcode counts of a cubin's SASS, per kernel: what a build flag or template change did to the machine code.

A compile can be judged on a machine without a GPU by the instructions it produced: the FMHA programs'
``-ftz=true`` (``fmha.FMHA_NVCC_FLAGS``) is checked this way, by the range tests and multiplies that leave
the softmax once ``exp2f`` may flush denormals.  ``cuobjdump`` ships with the CUDA toolkit and, without
one, inside Triton's wheel (``triton/backends/nvidia/bin``), so it is looked for in both.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

from kernelpilot.errors import ToolMissingError

#: one SASS instruction line: ``/*0130*/  @!P0 FMUL R3, R3, 0.5 ;`` -> the opcode's first part (``FMUL``)
_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)")
_FUNCTION = re.compile(r"^\s*Function : (\S+)", re.MULTILINE)


def find_cuobjdump() -> Path:
    """cuobjdump on PATH, beside nvcc, or in Triton's wheel; ToolMissingError naming all three."""
    from kernelpilot.toolchain import which

    found = which("cuobjdump")
    if found:
        return Path(found)
    nvcc = which("nvcc")
    if nvcc and (Path(nvcc).parent / "cuobjdump").exists():
        return Path(nvcc).parent / "cuobjdump"
    try:
        import triton

        bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        if bundled.exists():
            return bundled
    except ImportError:
        pass
    raise ToolMissingError("cuobjdump not found: not on PATH, not beside nvcc, not in the triton wheel")


def opcode_counts(sass: str) -> dict[str, Counter[str]]:
    """Per function of ``cuobjdump -sass`` text, how often each opcode (without modifiers) occurs."""
    counts: dict[str, Counter[str]] = {}
    marks = list(_FUNCTION.finditer(sass))
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(sass)
        counts[mark.group(1)] = Counter(_INSTRUCTION.findall(sass, mark.end(), end))
    return counts


def cubin_opcode_counts(cubin: Path) -> dict[str, Counter[str]]:
    """:func:`opcode_counts` of a cubin disassembled by :func:`find_cuobjdump`."""
    done = subprocess.run([str(find_cuobjdump()), "-sass", str(cubin)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"cuobjdump -sass {cubin} failed: {done.stderr.strip()[-500:]}")
    return opcode_counts(done.stdout)


#: one instruction with its address: ``/*3e80*/  @P0 BRA 0x3e80 ;`` -> (0x3e80, "@P0 BRA 0x3e80")
_ADDRESSED = re.compile(r"/\*([0-9a-f]{4,})\*/\s+([^;]*?)\s*;")
_BRANCH = re.compile(r"^(?:@!?U?P[T0-9]+\s+)?BRA(?:\.[A-Z.]+)?\s+0x([0-9a-f]+)$")
_REGISTER = re.compile(r"\b(?:U?R[0-9]+|U?P[0-6]|RZ|URZ|PT|UPT)\b")


def functions_sass(sass: str) -> dict[str, str]:
    """``cuobjdump -sass`` text split per function (mangled name -> its instructions' text)."""
    marks = list(_FUNCTION.finditer(sass))
    return {
        mark.group(1): sass[mark.end() : marks[i + 1].start() if i + 1 < len(marks) else len(sass)]
        for i, mark in enumerate(marks)
    }


def instructions(function: str) -> list[tuple[int, str]]:
    """A function's instructions as (address, text without the trailing ``;``), in order."""
    return [(int(addr, 16), text) for addr, text in _ADDRESSED.findall(function)]


def innermost_loop(function: str, opcode: str = "HGMMA") -> list[str]:
    """The instructions of the smallest backward-branch loop of ``function`` that contains ``opcode``.

    A GEMM mainloop's steady state is the short loop around its MMA instructions: comparing that loop
    between two kernels tells whether their per-k-block work differs, without a GPU.  Registers are kept
    (normalize with :func:`shape_of` to compare).  Empty when no loop holds the opcode.
    """
    lines = instructions(function)
    best: list[str] = []
    for i, (addr, text) in enumerate(lines):
        back = _BRANCH.match(text)
        if not back or int(back.group(1), 16) >= addr:
            continue
        body = [t for a, t in lines[: i + 1] if a >= int(back.group(1), 16)]
        if any(opcode in t for t in body) and (not best or len(body) < len(best)):
            best = body
    return best


def shape_of(instruction: str) -> str:
    """An instruction with its registers, predicates and addresses blanked, for comparing code shapes."""
    return re.sub(r"0x[0-9a-f]+", "#", _REGISTER.sub("r", instruction))
