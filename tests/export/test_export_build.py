"""The exported sm90 project builds: CMake configures it, nvcc preprocesses every kernel against the
bundled CUTLASS, the operator source compiles against the torch headers, one kernel compiles for
sm_90a (slow), and the Python package is valid Python."""

from __future__ import annotations

import os
import py_compile
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

STORE = REPO / "tests" / "data" / "replay" / "h200_gemm_bf16.sqlite"
CUTLASS = REPO / ".deps" / "cutlass"
NVCC = shutil.which("nvcc")
needs_tools = pytest.mark.skipif(
    not (NVCC and shutil.which("cmake") and shutil.which("ninja") and CUTLASS.exists()),
    reason="needs nvcc, cmake, ninja and CUTLASS headers in .deps/cutlass",
)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("build") / "proj"
    r = run_cli("export", "--store", str(STORE), "--target", "sm90", "--out", str(out), "--name", "kpb",
                "--cutlass-dir", str(CUTLASS))  # fmt: skip
    assert r.returncode == 0, r.stderr
    return out


@needs_tools
def test_project_is_self_contained_and_configures(project, tmp_path):
    assert (project / "third_party/cutlass/include/cutlass/cutlass.h").exists()
    assert (project / "third_party/cutlass/tools/util/include/cutlass/util/packed_stride.hpp").exists()
    py_compile.compile(str(project / "python/kpb/__init__.py"), doraise=True)
    py_compile.compile(str(project / "build_backend.py"), doraise=True)
    import sys

    r = subprocess.run(["cmake", "-S", str(project), "-B", str(tmp_path / "b"), "-G", "Ninja",
                        f"-DPython_EXECUTABLE={sys.executable}"], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ninja = (tmp_path / "b" / "build.ninja").read_text()
    for k in sorted((project / "csrc" / "kernels").iterdir()):
        assert f"csrc/kernels/{k.name}" in ninja
    assert "arch=compute_90a,code=sm_90a" in ninja and "_C.so" in ninja
    # the operators compile with torch's headers (both folders) and its C++ ABI
    import torch
    import torch.utils.cpp_extension as ce

    assert f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)} " in ninja
    assert all(f"-isystem {p}" in ninja for p in ce.include_paths())


@pytest.mark.slow
@needs_tools
def test_kernel_sources_pass_the_nvcc_front_end(project):
    """Every kernel and the table preprocess with nvcc against the bundled CUTLASS (all includes resolve)."""
    cutlass = project / "third_party" / "cutlass"
    for src in [*sorted((project / "csrc" / "kernels").iterdir()), project / "csrc" / "kernels_table.cu"]:
        r = subprocess.run(
            [NVCC, "-std=c++17", "-E", "-gencode", "arch=compute_90a,code=sm_90a", f"-I{project / 'include'}",
             f"-I{cutlass / 'include'}", f"-I{cutlass / 'tools/util/include'}", str(src), "-o", "/dev/null"],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert r.returncode == 0, (src.name, r.stderr[-3000:])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_operator_source_compiles_against_torch_headers(project, tmp_path):
    """ops.cpp (the torch operators) through the host compiler's front end with the installed torch's
    headers.  A CPU-only torch lacks one generated CUDA header (cuda_cmake_macros.h); it is written with
    the one define a CUDA build of torch puts there."""
    import torch
    import torch.utils.cpp_extension as ce

    stub = tmp_path / "stub" / "c10" / "cuda" / "impl"
    stub.mkdir(parents=True)
    (stub / "cuda_cmake_macros.h").write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    homes = [
        os.environ.get("CUDA_HOME", ""),
        str(Path(NVCC).resolve().parent.parent) if NVCC else "",
        "/usr/local/cuda",
    ]
    found = [
        Path(h) / "include" for h in homes if h and (Path(h) / "include" / "cuda_runtime_api.h").is_file()
    ]
    if not found:
        pytest.skip("needs the CUDA toolkit's headers (CUDA_HOME or /usr/local/cuda)")
    cuda_inc = found[0]
    inc = [a for p in ce.include_paths() for a in ("-isystem", p)]
    r = subprocess.run(
        ["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", *inc, "-isystem", str(tmp_path / "stub"),
         "-isystem", str(cuda_inc), f"-I{project / 'include'}",
         f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}", str(project / "csrc" / "ops.cpp")],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]


@pytest.mark.slow
@needs_tools
def test_one_kernel_compiles_for_sm90a(project, tmp_path):
    """A real device compile (minutes on two cores) of the swap-AB kernel: the one whose arguments are
    built from transposed views."""
    import json

    doc = json.loads((project / "dispatch.json").read_text())
    [swap] = [k["id"] for k in doc["kernels"] if k["config"].get("swap_ab")]
    cutlass = project / "third_party" / "cutlass"
    r = subprocess.run(
        [NVCC, "-std=c++17", "-O3", "-DNDEBUG", "-gencode", "arch=compute_90a,code=sm_90a", "--expt-relaxed-constexpr",
         f"-I{project / 'include'}", f"-I{cutlass / 'include'}", f"-I{cutlass / 'tools/util/include'}", "-c",
         str(project / "csrc" / "kernels" / f"{swap}.cu"), "-o", str(tmp_path / "k.o")],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    nm = subprocess.run(["nm", "-C", str(tmp_path / "k.o")], capture_output=True, text=True).stdout
    assert f"kpb::{swap}_run(" in nm and f"kpb::{swap}_workspace_bytes(" in nm
