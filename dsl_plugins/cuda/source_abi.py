"""The C ABI between kernelpilot and a CUDA source kernel (mirrors ``source_include/kernelpilot_cuda.hpp``).

Why a plain C ABI instead of a torch extension: compiling against the torch headers takes 30-60 s per
candidate, so an autotuning stage over a dozen configurations would spend minutes in the compiler.
A ``.cu`` that only includes ``cuda_runtime.h`` builds in a few seconds and is loaded with ``ctypes``.
"""

from __future__ import annotations

import ctypes
from importlib.resources import files
from pathlib import Path
from typing import Any

ABI_VERSION = 1
MAX_DIMS = 8
HEADER_NAME = "kernelpilot_cuda.hpp"

# torch dtype name -> kp_dtype code (same numbers as the enum in the header)
DTYPE_CODES: dict[str, int] = {
    "float16": 0,
    "bfloat16": 1,
    "float32": 2,
    "float64": 3,
    "int8": 4,
    "int16": 5,
    "int32": 6,
    "int64": 7,
    "uint8": 8,
    "bool": 9,
    "float8_e4m3fn": 10,
    "float8_e5m2": 11,
}


class KpTensor(ctypes.Structure):
    """``struct kp_tensor``: data pointer, dtype code, rank, shape and strides (in elements)."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("stride", ctypes.c_int64 * MAX_DIMS),
    ]


def include_dir() -> Path:
    """Folder holding ``kernelpilot_cuda.hpp`` (passed to nvcc with ``-I``)."""
    return Path(str(files("kernelpilot.dsl_plugins.cuda.source_include")))


def dtype_code(name: str) -> int:
    if name not in DTYPE_CODES:
        raise ValueError(f"dtype {name} has no kp_dtype code; allowed: {', '.join(DTYPE_CODES)}")
    return DTYPE_CODES[name]


def tensor_struct(tensor: Any) -> KpTensor:
    """Describe a torch tensor (any device) as a ``kp_tensor``; rank above 8 is refused."""
    if tensor.dim() > MAX_DIMS:
        raise ValueError(f"tensor of rank {tensor.dim()} exceeds the ABI's {MAX_DIMS} dimensions")
    item = KpTensor()
    item.data = tensor.data_ptr()
    item.dtype = dtype_code(str(tensor.dtype).removeprefix("torch."))
    item.ndim = tensor.dim()
    for i, (size, stride) in enumerate(zip(tensor.shape, tensor.stride(), strict=True)):
        item.shape[i] = int(size)
        item.stride[i] = int(stride)
    return item


def tensor_array(tensors: list[Any]) -> Any:
    """A C array of ``kp_tensor`` for ``kp_forward(args, num_args, stream)``."""
    array_type = KpTensor * max(1, len(tensors))
    array = array_type()
    for i, t in enumerate(tensors):
        array[i] = tensor_struct(t)
    return array


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
