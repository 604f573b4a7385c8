"""Write an export folder all at once: everything goes into a sibling temporary folder that is renamed
into place at the end, so an interrupted or failed export leaves no half-written DIR behind."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kernelpilot.errors import InputError


def write_atomically(out: Path, fill: Callable[[Path], None], *, force: bool = False) -> Path:
    """Call ``fill(tmp)`` to populate a fresh folder, then move it to ``out``.

    An existing non-empty ``out`` is an input error unless ``force`` (then it is replaced only after
    the new folder is complete)."""
    out = out.resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise InputError(
            "the output folder exists and is not empty: choose another --out or pass --force to replace it",
            file=str(out),
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.export-{os.getpid()}"
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        fill(tmp)
        if out.exists():
            out.rename(old)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not out.exists():
            old.rename(out)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return out


def write_files(out: Path, texts: dict[str, str]) -> list[str]:
    """Write ``{relative path: text}`` under ``out`` (parent folders made); returns the paths in order."""
    for rel, text in texts.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    return list(texts)


def write_kind_files(
    out: Path,
    env: Any,
    *,
    name: str,
    kind: str,
    context: dict[str, Any],
    kernels: Sequence[Any],
    render_kernel: Callable[[Any], str],
) -> list[str]:
    """The files every operator kind beyond GEMM adds to a CUDA export: its dispatch header, C++ header,
    kernel table and operator source (templates ``export/cuda/<kind>_*.j2`` rendered with ``context``),
    and one translation unit per kernel under ``csrc/<kind>/``.  Returns the paths relative to ``out``."""
    files = {
        f"include/{name}/{kind}_dispatch.h": f"{kind}_dispatch.h.j2",
        f"include/{name}/{kind}.h": f"{kind}.h.j2",
        f"csrc/{kind}_table.cu": f"{kind}_table.cu.j2",
        f"csrc/{kind}_ops.cpp": f"{kind}_ops.cpp.j2",
    }
    texts = {
        rel: env.get_template(f"export/cuda/{template}").render(context) for rel, template in files.items()
    }
    texts.update({f"csrc/{kind}/{kernel.symbol}.cu": render_kernel(kernel) for kernel in kernels})
    return write_files(out, texts)
