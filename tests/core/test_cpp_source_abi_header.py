"""The ``kp_tensor`` ABI has one definition (``kernelpilot.cpp_source.abi``): the shipped header is what
it generates, and every C++ DSL's contract header includes that one header instead of a copy."""

from __future__ import annotations

import ctypes
import re
from importlib.resources import files
from pathlib import Path

import pytest

from kernelpilot.cpp_source import abi


def test_shipped_header_is_generated_from_the_definition() -> None:
    shipped = (abi.include_dir() / abi.HEADER_NAME).read_text(encoding="utf-8")
    assert shipped == abi.render_header(), "regenerate with: python -m kernelpilot.cpp_source.abi"


def test_header_enum_and_limits_match_the_ctypes_side() -> None:
    header = abi.render_header()
    enum = dict(re.findall(r"^\s+(KP_\w+) = (\d+),$", header, flags=re.M))
    assert {name: int(code) for name, code in enum.items()} == {e: c for _, e, c in abi.DTYPES}
    assert f"#define KP_MAX_DIMS {abi.MAX_DIMS}" in header
    assert f"#define KP_ABI_VERSION {abi.ABI_VERSION}" in header
    # struct kp_tensor: pointer, two int32, two int64[MAX_DIMS] -- the ctypes layout has no padding surprises
    assert ctypes.sizeof(abi.KpTensor) == ctypes.sizeof(ctypes.c_void_p) + 8 + 2 * 8 * abi.MAX_DIMS
    assert len(set(abi.DTYPE_CODES.values())) == len(abi.DTYPES)  # codes are unique


def test_dsl_headers_include_the_shared_header_and_define_no_copy() -> None:
    plugin_headers = [
        Path(str(files("kernelpilot.dsl_plugins.cuda.source_include"))) / "kernelpilot_cuda.hpp",
        Path(str(files("kernelpilot.dsl_plugins.sycl.source_include"))) / "kernelpilot_sycl.hpp",
        Path(str(files("kernelpilot.dsl_plugins.sycl.source_include"))) / "kp_io.hpp",
    ]
    for header in plugin_headers:
        text = header.read_text(encoding="utf-8")
        assert f'#include "{abi.HEADER_NAME}"' in text, header.name
        assert "struct kp_tensor {" not in text and "enum kp_dtype" not in text, header.name
    for folder in ("cuda", "sycl"):
        include = Path(str(files(f"kernelpilot.dsl_plugins.{folder}.source_include")))
        assert not (include / abi.HEADER_NAME).exists()


def test_dtype_code_rejects_unknown_names() -> None:
    assert abi.dtype_code("bfloat16") == 1
    with pytest.raises(ValueError, match="complex64 has no kp_dtype code; allowed: float16"):
        abi.dtype_code("complex64")
