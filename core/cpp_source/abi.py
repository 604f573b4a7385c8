"""The ``kp_tensor`` C ABI shared by every C++ source DSL: one definition, two renderings.

A C++ kernel receives its tensors as an array of ``struct kp_tensor`` (data pointer, dtype code, rank,
shape and strides in elements).  The dtype codes, the rank limit and the ABI version are defined once,
here; :class:`KpTensor` (the ctypes side) and the header ``include/kernelpilot_tensor.hpp`` (the C++
side, written by :func:`render_header`) are both derived from it, so they cannot drift apart.  A test
checks that the shipped header is exactly what :func:`render_header` produces; after changing the
definition, regenerate it with ``python -m kernelpilot.cpp_source.abi``.
"""

from __future__ import annotations

import ctypes
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

ABI_VERSION = 1
MAX_DIMS = 8
HEADER_NAME = "kernelpilot_tensor.hpp"

# (torch dtype name, C enum name, code); codes are part of the ABI and never renumbered
DTYPES: tuple[tuple[str, str, int], ...] = (
    ("float16", "KP_FLOAT16", 0),
    ("bfloat16", "KP_BFLOAT16", 1),
    ("float32", "KP_FLOAT32", 2),
    ("float64", "KP_FLOAT64", 3),
    ("int8", "KP_INT8", 4),
    ("int16", "KP_INT16", 5),
    ("int32", "KP_INT32", 6),
    ("int64", "KP_INT64", 7),
    ("uint8", "KP_UINT8", 8),
    ("bool", "KP_BOOL", 9),
    ("float8_e4m3fn", "KP_FLOAT8_E4M3", 10),
    ("float8_e5m2", "KP_FLOAT8_E5M2", 11),
)
# torch dtype name -> kp_dtype code
DTYPE_CODES: dict[str, int] = {name: code for name, _, code in DTYPES}


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
    """Folder holding ``kernelpilot_tensor.hpp`` (every C++ DSL passes it to its compiler with ``-I``)."""
    return Path(str(files("kernelpilot.cpp_source.include")))


def render_header() -> str:
    """The C++ side of the ABI, generated from :data:`DTYPES`, :data:`MAX_DIMS` and :data:`ABI_VERSION`."""
    enum = "\n".join(f"  {enum_name} = {code}," for _, enum_name, code in DTYPES)
    return f"""// kp_tensor: the tensor descriptor between kernelpilot and C++ source kernels (CUDA, SYCL, ...).
// GENERATED from kernelpilot/cpp_source/abi.py (python -m kernelpilot.cpp_source.abi); do not edit.
// Plain C++ (no CUDA or SYCL), so the ABI can be tested with any C++17 compiler.
#pragma once

#include <cstdint>

#define KP_ABI_VERSION {ABI_VERSION}
#define KP_MAX_DIMS {MAX_DIMS}

// dtype codes (kernelpilot.cpp_source.abi.DTYPE_CODES: the same numbers for every DSL)
enum kp_dtype : int32_t {{
{enum}
}};

struct kp_tensor {{
  void* data;                   // device pointer (CUDA) or USM pointer (SYCL runner)
  int32_t dtype;                // kp_dtype
  int32_t ndim;
  int64_t shape[KP_MAX_DIMS];
  int64_t stride[KP_MAX_DIMS];  // in elements
}};

#define KP_EXPORT extern "C" __attribute__((visibility("default")))
"""


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
    """A C array of ``kp_tensor`` for ``kp_forward(args, num_args, ...)``."""
    array_type = KpTensor * max(1, len(tensors))
    array = array_type()
    for i, t in enumerate(tensors):
        array[i] = tensor_struct(t)
    return array


def main(argv: list[str] | None = None) -> int:
    """Write the header (into the package, or to the path given) from the one definition."""
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else include_dir() / HEADER_NAME
    target.write_text(render_header(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
