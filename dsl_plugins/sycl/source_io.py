"""The file I/O contract between kernelpilot and a source-kernel runner program (SYCL today).

Why files: a SYCL kernel runs in a program built by icpx, not inside the Python process, so tensors
cross the process boundary as raw bytes plus a manifest.  The C++ side is ``source_include/kp_io.hpp``;
this module is the Python side (write inputs, run, read outputs and timings).  Layout::

    in/manifest.jsonl   one JSON object per line: index, name, role, dtype_code, shape, nbytes, file
    in/t<i>.bin         raw C-order bytes of tensor i (outputs: the poisoned initial contents)
    out/t<i>.bin        outputs after the first call
    out/result.json     {"status": int, "device": str, "samples_ms": [float, ...]}

Command line of a runner: ``PROGRAM --input_dir in --output_dir out --warmup N --reps N``; exit 0 ok,
2 contract error (message on stderr), 4 kp_forward returned non-zero.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpilot.cpp_source.abi import DTYPE_CODES
from kernelpilot.proc import communicate_or_kill

ROLES = ("input", "param", "output")
CODE_DTYPES = {code: name for name, code in DTYPE_CODES.items()}


@dataclass
class ManifestEntry:
    index: int
    name: str
    role: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int

    @property
    def file(self) -> str:
        return f"t{self.index}.bin"

    def json_line(self) -> str:
        # fixed key order and no nesting beyond ``shape``: kp_io.hpp reads it without a JSON library
        return json.dumps(
            {
                "index": self.index,
                "name": self.name,
                "role": self.role,
                "dtype_code": DTYPE_CODES[self.dtype],
                "shape": list(self.shape),
                "nbytes": self.nbytes,
                "file": self.file,
            }
        )


def tensor_bytes(tensor: Any) -> bytes:
    """Raw C-order bytes of a tensor (any dtype, bfloat16 included: viewed as uint8)."""
    t = tensor.detach().to("cpu").contiguous()
    return t.reshape(-1).view(__import__("torch").uint8).numpy().tobytes()


def write_inputs(folder: Path, tensors: list[tuple[str, str, Any]]) -> list[ManifestEntry]:
    """Write ``(name, role, tensor)`` triples and the manifest; returns the entries in order."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    lines = []
    for index, (name, role, tensor) in enumerate(tensors):
        if role not in ROLES:
            raise ValueError(f"role {role!r} is not one of {', '.join(ROLES)}")
        dtype = str(tensor.dtype).removeprefix("torch.")
        data = tensor_bytes(tensor)
        entry = ManifestEntry(index, name, role, dtype, tuple(int(s) for s in tensor.shape), len(data))
        (folder / entry.file).write_bytes(data)
        entries.append(entry)
        lines.append(entry.json_line())
    (folder / "manifest.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return entries


def read_outputs(folder: Path, entries: list[ManifestEntry]) -> list[Any]:
    """Output tensors the runner wrote (CPU tensors, dtype and shape from the manifest)."""
    import torch

    outs = []
    for entry in entries:
        if entry.role != "output":
            continue
        path = folder / entry.file
        if not path.is_file():
            raise FileNotFoundError(f"the runner wrote no {entry.file} for output {entry.name!r}")
        data = path.read_bytes()
        if len(data) != entry.nbytes:
            raise ValueError(f"{entry.file}: {len(data)} bytes, expected {entry.nbytes}")
        flat = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        outs.append(flat.view(getattr(torch, entry.dtype)).reshape(entry.shape))
    return outs


def read_result(folder: Path) -> dict[str, Any]:
    path = folder / "result.json"
    if not path.is_file():
        raise FileNotFoundError("the runner wrote no result.json")
    return json.loads(path.read_text(encoding="utf-8"))


def runner_command(program: Path, in_dir: Path, out_dir: Path, warmup: int, reps: int) -> list[str]:
    return [
        str(program),
        "--input_dir",
        str(in_dir),
        "--output_dir",
        str(out_dir),
        "--warmup",
        str(warmup),
        "--reps",
        str(reps),
    ]


@dataclass
class RunOutcome:
    returncode: int
    stderr: str
    timed_out: bool = False


def run_program(command: list[str], timeout_s: float, env: dict[str, str] | None = None) -> RunOutcome:
    """Run a runner in its own process group; a hang is killed with its children."""
    out_dir = Path(command[command.index("--output_dir") + 1])
    out_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or dict(os.environ),
        start_new_session=True,
    )
    out, err, timed_out = communicate_or_kill(proc, timeout_s)
    if timed_out:
        return RunOutcome(124, f"no result within {timeout_s:.0f} s (killed)", timed_out=True)
    return RunOutcome(proc.returncode, (err + out).strip()[-3000:])
