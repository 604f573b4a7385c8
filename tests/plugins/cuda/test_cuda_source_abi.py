"""ABI CONTRACT TEST (not a CUDA result): the ctypes side of ``kp_forward`` against the C++ header.

A host-only shared library built with g++ includes the real ``kernelpilot_cuda.hpp``, exports
``kp_forward`` and computes the row-RMS example on CPU tensors.  The worker's own classes
(:class:`SourceKernel`, ``tensor_array``, ``load_library``) call it exactly as they call an nvcc-built
kernel on the GPU, so a layout mismatch between ``KpTensor`` and ``struct kp_tensor`` (field order,
padding, dtype codes, argument order: inputs, parameters, outputs) fails here, not silently on a GPU.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernelpilot.cpp_source import abi
from kernelpilot.dsl_plugins.cuda.source_abi import include_dir, load_library
from kernelpilot.dsl_plugins.cuda.source_worker import SourceKernel, oracle_parameters
from kernelpilot.worker_kit.compare import compare, flatten
from kernelpilot.worker_kit.model import build_model, load_module, make_inputs
from kernelpilot.worker_kit.poison import poisoned_allocations

CUDA_INCLUDE = Path("/usr/local/cuda/include")
pytestmark = pytest.mark.skipif(
    shutil.which("g++") is None or not (CUDA_INCLUDE / "cuda_runtime.h").is_file(),
    reason="needs g++ and the CUDA toolkit headers",
)

HOST_KERNEL = r"""
// Host-only kp_forward (ABI contract test): y[r] = sqrt(mean(x[r,:]^2)) * w[0] + b[0], plus checks of
// every descriptor field; returns a distinct code for each mismatch so the test can say which.
#include <cmath>
#include "kernelpilot_cuda.hpp"

KP_EXPORT int kp_forward(const kp_tensor* args, int num_args, cudaStream_t stream) {
  if (num_args != 4) return 10 + num_args;
  if (stream != nullptr) return 9;
  const kp_tensor &x = args[0], &w = args[1], &b = args[2], &y = args[3];
  if (x.dtype != KP_FLOAT32 || w.dtype != KP_FLOAT32 || y.dtype != KP_FLOAT32) return 2;
  if (x.ndim != 2 || y.ndim != 1 || w.ndim != 1) return 3;
  if (x.stride[0] != x.shape[1] || x.stride[1] != 1) return 4;
  if (y.shape[0] != x.shape[0]) return 5;
  const float* xp = static_cast<const float*>(x.data);
  const float* wp = static_cast<const float*>(w.data);
  const float* bp = static_cast<const float*>(b.data);
  float* yp = static_cast<float*>(y.data);
  for (int64_t r = 0; r < x.shape[0] / ROW_DIVISOR; ++r) {
    double acc = 0;
    for (int64_t c = 0; c < x.shape[1]; ++c) acc += double(xp[r * x.stride[0] + c]) * xp[r * x.stride[0] + c];
    yp[r] = float(std::sqrt(acc / x.shape[1])) * wp[0] + bp[0];
  }
  return 0;
}
"""

ORACLE = """
import torch

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.full((1,), 1.5))
        self.register_buffer("shift", torch.full((1,), 0.25))

    def forward(self, x):
        return x.double().pow(2).mean(-1).sqrt().float() * self.scale + self.shift
"""


def build(tmp_path: Path, row_divisor: int = 1) -> Path:
    src = tmp_path / "host_kernel.cpp"
    src.write_text(HOST_KERNEL)
    lib = tmp_path / f"host_kernel_{row_divisor}.so"
    command = ["g++", "-std=c++17", "-O1", "-shared", "-fPIC", f"-DROW_DIVISOR={row_divisor}"]
    command += ["-I", str(include_dir()), "-I", str(abi.include_dir()), "-I", str(CUDA_INCLUDE)]
    command += [str(src), "-o", str(lib)]
    subprocess.run(command, check=True, timeout=120)
    return lib


def run(tmp_path: Path, row_divisor: int) -> dict:
    import torch

    oracle_file = tmp_path / "oracle.py"
    oracle_file.write_text(ORACLE)
    oracle = build_model(torch, load_module(str(oracle_file), "abi_oracle"), {"init_args": []}, "cpu")
    variant = {"inputs": [{"name": "x", "shape": [7, 33], "dtype": "float32"}]}
    inputs = make_inputs(torch, variant, 11, "cpu")
    with torch.no_grad():
        ref = oracle(*inputs)
    params = oracle_parameters(torch, oracle)
    assert [p.shape for p in params] == [(1,), (1,)]  # state_dict order: parameter, then buffer
    kernel = SourceKernel(torch, str(build(tmp_path, row_divisor)), params, flatten(torch, ref))
    with torch.no_grad(), poisoned_allocations(torch):
        launch, outs = kernel.launcher(inputs)
    launch()
    return compare(torch, outs, ref, 1e-5, 1e-6)


def test_ctypes_layout_matches_the_header_and_args_are_in_contract_order(tmp_path: Path) -> None:
    result = run(tmp_path, row_divisor=1)
    assert result["ok"], result["message"]


def test_unwritten_rows_stay_poisoned_through_the_abi(tmp_path: Path) -> None:
    result = run(tmp_path, row_divisor=2)
    assert not result["ok"] and "never written" in result["message"]


def test_library_without_the_header_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "bare.cpp"
    src.write_text('extern "C" int kp_forward(void*, int, void*) { return 0; }\n')
    lib = tmp_path / "bare.so"
    subprocess.run(["g++", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True, timeout=60)
    with pytest.raises(RuntimeError, match="kernelpilot_cuda.hpp"):
        load_library(lib)
