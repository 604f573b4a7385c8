"""The CUDA side of the C ABI: ``source_include/kernelpilot_cuda.hpp`` and loading a built kernel.

The tensor descriptor (``kp_tensor``, dtype codes, rank limit, ABI version) is the core's
(:mod:`kernelpilot.cpp_source.abi`, shared with every C++ DSL); this module adds what is CUDA's: the
header that declares ``kp_forward(const kp_tensor*, int, cudaStream_t)`` and ``kp_abi_version``, and
the ``dlopen`` of a built library.

Why a plain C ABI instead of a torch extension: compiling against the torch headers takes 30-60 s per
candidate, so an autotuning stage over a dozen configurations would spend minutes in the compiler.
A ``.cu`` that only includes ``cuda_runtime.h`` builds in a few seconds and is loaded with ``ctypes``.
"""

from __future__ import annotations

import ctypes
from importlib.resources import files
from pathlib import Path
from typing import Any

from kernelpilot.cpp_source.abi import ABI_VERSION, DTYPE_CODES, KpTensor, tensor_array

HEADER_NAME = "kernelpilot_cuda.hpp"


def include_dir() -> Path:
    """Folder holding ``kernelpilot_cuda.hpp`` (passed to nvcc with ``-I``, beside the core's ABI folder)."""
    return Path(str(files("kernelpilot.dsl_plugins.cuda.source_include")))


def load_library(path: Path) -> Any:
    """``dlopen`` a built kernel; checks the ABI version and returns the ``kp_forward`` function."""
    lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    try:
        version = lib.kp_abi_version
    except AttributeError:
        raise RuntimeError(
            f'the library defines no kp_abi_version(): the kernel file must #include "{HEADER_NAME}"'
        ) from None
    version.restype = ctypes.c_int
    if version() != ABI_VERSION:
        raise RuntimeError(f"kernel built against ABI {version()}, kernelpilot speaks {ABI_VERSION}")
    try:
        forward = lib.kp_forward
    except AttributeError:
        raise RuntimeError(
            "the library defines no kp_forward(const kp_tensor*, int, cudaStream_t) "
            "(declare it with KP_EXPORT)"
        ) from None
    forward.restype = ctypes.c_int
    forward.argtypes = [ctypes.POINTER(KpTensor), ctypes.c_int, ctypes.c_void_p]
    return lib, forward


__all__ = [
    "ABI_VERSION",
    "DTYPE_CODES",
    "HEADER_NAME",
    "KpTensor",
    "include_dir",
    "load_library",
    "tensor_array",
]
