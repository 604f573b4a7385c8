"""The exported sm90 project builds: CMake configures it (with torch's headers and C++ ABI), nvcc
preprocesses every kernel against the bundled CUTLASS, the operator source compiles against the torch
headers, and `pip install DIR` of a one-kernel export builds and installs the wheel offline (slow: one
real sm_90a compile)."""

from __future__ import annotations

import inspect
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
    # the operator library shares the process's runtimes: the shared libcudart torch loads (not a
    # static copy), and torch's own libstdc++, linked by path ahead of what the compiler adds (a
    # compiler whose libstdc++ is static put a second copy of the locale state in _C.so: crash)
    link = ninja.split("\nbuild _C.so:", 1)[1].split("\n\n", 1)[0]
    assert "libcudart.so" in link and "cudart_static" not in ninja
    libs = link.split("LINK_LIBRARIES = ", 1)[1].split("\n", 1)[0]
    assert torch_libstdcxx() in libs.split()
    assert libs.index(torch_libstdcxx()) < libs.index("-lc10 ")
    # ops.cpp is compiled with the C++ standard torch's own extension builder uses
    std = 20 if "-std=c++20" in inspect.getsource(ce) else 17
    ops_flags = ninja.split("csrc/ops.cpp.o:", 1)[1].split("\n\n", 1)[0]
    flags = ops_flags.split("FLAGS = ", 1)[1].split("\n", 1)[0].split()
    assert any(f.startswith("-std=") and f.endswith(f"++{std}") for f in flags), flags


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


def _cuda_include() -> Path:
    """The CUDA toolkit's include folder (the operator sources include cuda_runtime_api.h); skips without it."""
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
    return found[0]


def _c10_cuda_stub(root: Path) -> None:
    """The one generated c10 CUDA header a CPU-only torch lacks (CMake writes it in a CUDA build)."""
    stub = root / "c10" / "cuda" / "impl"
    stub.mkdir(parents=True)
    (stub / "cuda_cmake_macros.h").write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_operator_source_compiles_against_torch_headers(project, tmp_path):
    """ops.cpp (the torch operators) through the host compiler's front end with the installed torch's
    headers.  A CPU-only torch lacks one generated CUDA header (cuda_cmake_macros.h); it is written with
    the one define a CUDA build of torch puts there."""
    import torch
    import torch.utils.cpp_extension as ce

    _c10_cuda_stub(tmp_path / "stub")
    cuda_inc = _cuda_include()
    inc = [a for p in ce.include_paths() for a in ("-isystem", p)]
    r = subprocess.run(
        ["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", *inc, "-isystem", str(tmp_path / "stub"),
         "-isystem", str(cuda_inc), f"-I{project / 'include'}",
         f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}", str(project / "csrc" / "ops.cpp")],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]


def torch_libstdcxx() -> str:
    """The libstdc++ this (torch-importing) process runs on, as the exported CMakeLists.txt finds it."""
    import torch  # noqa: F401 - loads libstdc++ if the interpreter did not

    maps = Path("/proc/self/maps").read_text().splitlines()
    return next(line.split()[-1] for line in maps if "/libstdc++.so" in line)


@pytest.mark.skipif(not (shutil.which("g++") and shutil.which("nm")), reason="needs g++ and nm")
def test_build_backend_refuses_a_static_libstdcxx_copy(project, tmp_path):
    """The generated build backend rejects an operator library carrying libstdc++'s locale code (what a
    compiler linking libstdc++ statically produces) and accepts one linked to the shared libstdc++."""
    import importlib.util

    src = tmp_path / "op.cpp"
    src.write_text("#include <sstream>\n#include <string>\n"
                   "std::string f(long long x) { std::ostringstream s; s << x; return s.str(); }\n")  # fmt: skip
    libs = {}
    for kind, flags in {"static": ["-static-libstdc++"], "shared": []}.items():
        libs[kind] = tmp_path / f"lib_{kind}.so"
        subprocess.run(
            ["g++", "-shared", "-fPIC", "-O1", str(src), *flags, "-o", str(libs[kind])], check=True
        )
    spec = importlib.util.spec_from_file_location("kpb_build_backend", project / "build_backend.py")
    backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(backend)
    backend._check_cxx_runtime(libs["shared"])
    with pytest.raises(RuntimeError, match=r"std::locale.*statically"):
        backend._check_cxx_runtime(libs["static"])


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
    generated CUDA header: both are stubbed for the link (the library is then not loadable here).  The
    build links libstdc++ statically by default (LDFLAGS=-static-libstdc++), as the GPU machine's
    compiler does: the operator library must still use the process's shared libstdc++."""
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
    env = dict(os.environ, MAX_JOBS="2", LDFLAGS="-static-libstdc++")
    if torch.version.cuda is None:
        stub = tmp_path / "stub"
        _c10_cuda_stub(stub)
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
    # the CUDA runtime is torch's shared libcudart and the C++ runtime torch's shared libstdc++: neither
    # the runtime API nor libstdc++'s locale code is defined inside _C.so
    needed = subprocess.run(
        ["readelf", "-d", str(site / "kpw" / "_C.so")], capture_output=True, text=True
    ).stdout
    assert "libcudart.so" in needed and "libstdc++.so.6" in needed
    assert not any(" _ZNSt6locale" in line for line in nm_defined_dynamic(site / "kpw" / "_C.so"))
    defined = {
        line.split()[-1] for line in nm.splitlines() if len(line.split()) == 3 and line.split()[1] in "tT"
    }
    assert not defined & {"cudaLaunchKernel", "cudaDeviceGetAttribute", "__cudaRegisterFatBinary"}


def nm_defined_dynamic(lib: Path) -> list[str]:
    return subprocess.run(
        ["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True
    ).stdout.splitlines()


def json_loads(path: Path):
    import json

    return json.loads(path.read_text())


def _cubin_sections(path: Path) -> dict[str, bytes]:
    """Section name -> bytes of a cubin (ELF64, little-endian): enough ELF to find a kernel's code."""
    import struct

    b = path.read_bytes()
    (shoff,) = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    strtab = hdrs[shstrndx][4]
    out = {}
    for name_off, kind, _, _, off, size, *_ in hdrs:
        name = b[strtab + name_off : b.index(b"\0", strtab + name_off)].decode()
        out[name] = b"" if kind == 8 else b[off : off + size]  # SHT_NOBITS holds no bytes
    return out


@pytest.mark.slow
@needs_tools
def test_exported_kernel_machine_code_is_the_tuning_programs(project, tmp_path):
    """The exported translation unit and the tuning program of the same config, each compiled to sm_90a
    machine code with its own flags (the export's CMake line: CMake's Release flags, -fPIC; the tuner's
    NVCC_FLAGS), hold the same GEMM kernel: byte-identical code and constant bank.  Two real device
    compiles of the smallest kernel (a minute or two on two cores)."""
    import json

    from kernelpilot.dsl_plugins.cuda.gemm import NVCC_FLAGS, render_source

    doc = json.loads((project / "dispatch.json").read_text())
    k = min(doc["kernels"], key=lambda k: k["config"]["tile"][0] * k["config"]["tile"][1])
    prog = tmp_path / "program.cu"
    prog.write_text(render_source(k["config"], k["dtype"], k["layout"]))
    cutlass = project / "third_party" / "cutlass"
    inc = [f"-I{project / 'include'}", f"-I{cutlass / 'include'}", f"-I{cutlass / 'tools/util/include'}"]
    device = [f for f in NVCC_FLAGS if not f.startswith("-Xptxas")]
    builds = {
        "program": [NVCC, "-cubin", *device, *inc, str(prog)],
        "export": [
            NVCC,
            "-cubin",
            "-O3",
            "-DNDEBUG",
            "-std=c++17",
            "-Xcompiler=-fPIC",
            *device,
            *inc,
            str(project / "csrc" / "kernels" / f"{k['id']}.cu"),
        ],  # fmt: skip
    }
    texts = {}
    for side, cmd in builds.items():
        cubin = tmp_path / f"{side}.cubin"
        r = subprocess.run([*cmd, "-o", str(cubin)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]
        texts[side] = {n: s for n, s in _cubin_sections(cubin).items() if "GemmUniversal" in n}
    code = [n for n in texts["export"] if n.startswith(".text.")]
    assert len(code) == 1 and len(texts["export"][code[0]]) > 1000
    for name in code + [n for n in texts["export"] if n.startswith(".nv.constant0.")]:
        assert texts["program"][name] == texts["export"][name], name
