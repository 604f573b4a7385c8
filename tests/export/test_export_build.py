"""The exported sm90 project builds: CMake configures it (with torch's headers and C++ ABI), nvcc
preprocesses every kernel against the bundled CUTLASS, the operator source compiles against the torch
headers, and `pip install DIR` of a one-kernel export builds and installs the wheel offline (slow: one
real sm_90a compile)."""

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


def _one_kernel_run(tmp: Path) -> Path:
    """A run document with one workload: the recorded best of M=16 (the swap-AB kernel, whose arguments
    are built from transposed views), taken from the store with SQL."""
    import json
    import sqlite3

    con = sqlite3.connect(f"file:{STORE}?mode=ro", uri=True)
    problem, cfg, runtime, ms = con.execute(
        "select problem, config_key, runtime, time_ms from measurements where status='ok' and problem like '%\"M\":16,%'"
        " order by time_ms limit 1"
    ).fetchone()
    dims = {**json.loads(problem), "layout": "rr"}
    best = {"config": json.loads(cfg), "label": "m16", "runtime": json.loads(runtime), "time_ms": ms}
    run = {"target": "sm90", "device": "NVIDIA H200", "run_id": "from-store",
           "workloads": [{"name": "m16", "kernel": "gemm", "dims": dims, "dtype": "bf16", "target": "sm90", "best": best}]}  # fmt: skip
    path = tmp / "one.json"
    path.write_text(json.dumps(run))
    return path


@pytest.mark.slow
@needs_tools
def test_pip_install_builds_the_wheel_offline(tmp_path):
    """`pip install DIR` with build isolation and no index (as offline): the project's own backend runs
    CMake + Ninja -- one real sm_90a compile of the swap-AB kernel (minutes on two cores) -- and
    installs the package with its operator library.  A CPU-only torch has no CUDA libraries and lacks one
    generated CUDA header: both are stubbed for the link (the library is then not loadable here)."""
    import os
    import sys

    import torch

    out = tmp_path / "proj"
    r = run_cli(
        "export",
        str(_one_kernel_run(tmp_path)),
        "--out",
        str(out),
        "--name",
        "kpw",
        "--cutlass-dir",
        str(CUTLASS),
    )
    assert r.returncode == 0, r.stderr
    assert json_loads(out / "dispatch.json")["kernels"][0]["config"]["swap_ab"] is True
    env = dict(os.environ, MAX_JOBS="2")
    if torch.version.cuda is None:
        stub = tmp_path / "stub"
        (stub / "c10" / "cuda" / "impl").mkdir(parents=True)
        (stub / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").write_text(
            "#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n"
        )
        (tmp_path / "e.c").write_text("")
        for lib in ("torch_cuda", "c10_cuda"):
            subprocess.run(
                ["gcc", "-shared", "-fPIC", "-o", str(stub / f"lib{lib}.so"), str(tmp_path / "e.c")],
                check=True,
            )
        env.update(CPLUS_INCLUDE_PATH=str(stub), LIBRARY_PATH=str(stub))
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(site), str(out)],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=3000)  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert {p.name for p in (site / "kpw").iterdir()} >= {"__init__.py", "dispatch.json", "_C.so"}
    nm = subprocess.run(["nm", "-C", str(site / "kpw" / "_C.so")], capture_output=True, text=True).stdout
    assert "kpw::k000_run(" in nm and "kpw::gemm_run(" in nm


def json_loads(path: Path):
    import json

    return json.loads(path.read_text())
