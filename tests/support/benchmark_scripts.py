"""Load a script of ``benchmarks/`` as a module, so tests can call its helpers on the CPU.

The scripts are not a package (each runs as ``python benchmarks/NAME.py``) and several import their
siblings (``import cuda_kinds_common``) as a script run would find them; the folder is on ``sys.path``
only while the script's top level runs, so no test leaks it into the next.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark_script(name: str) -> ModuleType:
    """The module of ``benchmarks/<name>.py``, executed afresh (registered under ``name`` nowhere)."""
    path = BENCHMARKS / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(f"no benchmark script {path.name} in {BENCHMARKS}")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module
