"""`kernelpilot export` for Intel Xe: the compiled-kernel part (kernel TUs, kernels table, XPU operators,
CMake library, pip build) without icpx.

The run document is synthetic (configs the bmg model accepts, made-up times): no Xe hardware measured
anything here and nothing below reads a time as a result.  What is checked:

* the exported kernel translation units instantiate the tuning program's kernel: the type chain, the
  decomposition and the argument construction rendered from the same macros (``sycl/gemm_kernel.j2``)
  are in the tuner's program for that config and in the exported file;
* the operator source declares the four ops with XPU and CPU impls and routes what the kernels cannot
  take to ``at::matmul`` / an error (source contract);
* ``cmake -S DIR -B build`` configures without icpx (header target only, says the kernels need icpx);
  ``pip install DIR`` stops before CMake naming icpx and the target;
* host-side compile (g++, ``-fsyntax-only``) of every kernel TU and the kernels table against the real
  sycl-tla and SYCL headers, the mechanism tests/plugins/sycl/test_sycl_host_syntax.py uses for the
  tuning programs (same headers, same flags, same skip reasons); the operator source the same way
  against torch's headers;
* with icpx on PATH (never in CI): the kernels library builds.

None of this is a device compile: DPAS, block-2D loads, IGC and ocloc need icpx and an Intel GPU.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpilot.dsl_plugins.sycl import programs
from tests.conftest import run_cli
from tests.support.xe_runs import bmg_gemm_workload, write_bmg_run

NAME = "kpxe"
#: (M, N, K, dtype, layout, config overrides, runtime): default, stream-K, split-K and an rc f16 kernel
CASES = [
    (4096, 4096, 4096, "bf16", "rr", {"wg": [256, 256, 32], "sg": [8, 4, 1], "stages": 2}, {}),
    (2048, 4096, 8192, "bf16", "rr", {"wg": [256, 256, 32], "sg": [8, 4, 1], "stages": 2, "schedule": "streamk"},
     {"mode": "dp", "splits": 1}),
    (512, 1024, 8192, "bf16", "rr", {"wg": [128, 256, 32], "sg": [4, 8, 1], "stages": 3, "schedule": "splitk"},
     {"mode": "splitk", "splits": 4}),
    (1024, 2048, 4096, "f16", "rc", {"wg": [128, 256, 32], "sg": [4, 8, 1], "stages": 3}, {}),
]  # fmt: skip


def _run_doc(tmp: Path) -> Path:
    workloads = [
        bmg_gemm_workload(i, (m, n, k), layout, dtype, {"kernel": "gemm", "dtype": dtype, "schedule": "default", **cfg},
                          f"c{i}", runtime)
        for i, (m, n, k, dtype, layout, cfg, runtime) in enumerate(CASES)
    ]  # fmt: skip
    return write_bmg_run(tmp, workloads)


@pytest.fixture(scope="module")
def xe_export(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("xe-ext")
    r = run_cli(
        "export", str(_run_doc(tmp)), "--out", str(tmp / "out"), "--name", NAME, "--fallback", "vendor"
    )
    assert r.returncode == 0, r.stderr
    return tmp / "out"


def _kernels(out: Path) -> list[dict]:
    doc = json.loads((out / "dispatch.json").read_text())
    return doc["kernels"]


def test_export_writes_the_kernel_project(xe_export):
    kernels = _kernels(xe_export)
    assert len(kernels) == len(CASES)
    expected = [
        "CMakeLists.txt", "pyproject.toml", "build_backend.py", "README.md", "dispatch.json", "tile_shapes.json",
        f"include/{NAME}/dispatch.hpp", f"include/{NAME}/kernels.hpp", "src/kernels_table.cpp", "csrc/ops.cpp",
        f"python/{NAME}/__init__.py", f"python/{NAME}/dispatch.json", "examples/table.cpp",
        *[f"src/kernels/k{i:03d}.cpp" for i in range(len(CASES))],
    ]  # fmt: skip
    missing = [rel for rel in expected if not (xe_export / rel).is_file()]
    assert not missing
    cmake = (xe_export / "CMakeLists.txt").read_text()
    for i in range(len(CASES)):
        assert f"src/kernels/k{i:03d}.cpp" in cmake
    header = (xe_export / "include" / NAME / "kernels.hpp").read_text()
    for i in range(len(CASES)):
        assert f"std::size_t k{i:03d}_workspace_bytes(const GemmCall& c);" in header
        assert f"int k{i:03d}_run(const GemmCall& c, void* workspace, std::size_t workspace_bytes);" in header
    assert "sycl::queue* queue;" in header and "const char* mode;" in header
    table = (xe_export / "src" / "kernels_table.cpp").read_text()
    for i in range(len(CASES)):
        assert f"case {i}: return k{i:03d}_run(c, workspace, workspace_bytes);" in table
        assert f'case {i}: return "f32";' in table  # bf16 / f16 operands: the program's f32 output


def test_exported_kernels_are_the_tuning_programs_kernel(xe_export):
    """Each kernel TU holds the type chain, decomposition and argument construction of the tuner's program
    for that config, rendered from the same macros; the macros are the program's text (not an empty
    include), and the kernel's run-time knobs reach the entry point."""
    doc = json.loads((xe_export / "dispatch.json").read_text())
    rows = {(e["dims"]["M"], e["dims"]["N"], e["dims"]["K"]): e for e in doc["entries"]}
    macros = programs._env().get_template("sycl/gemm_kernel.j2")
    for m, n, k, dtype, layout, cfg, _ in CASES:
        entry = rows[(m, n, k)]
        config = {"kernel": "gemm", "dtype": dtype, "schedule": "default", **cfg}
        problem = {"M": m, "N": n, "K": k, "layout": layout, "dtype": dtype}
        program = programs.render_program("gemm", config, problem, "bmg", "v")["gemm.cpp"]
        ctx = programs.render_context("gemm", config, problem, "bmg", "v")
        module = macros.make_module(ctx)
        types = str(module.types())
        exported = (xe_export / "src" / "kernels" / f"{entry['kernel']}.cpp").read_text()
        wg = cfg["wg"]
        assert f"using TileShape = Shape<_{wg[0]}, _{wg[1]}, _{wg[2]}>;" in types
        assert types.startswith("using ElementA = ") and "using Gemm = " in types
        assert types in program, "the program no longer renders the shared type chain"
        assert types in exported, f"{entry['kernel']}: exported type chain differs from the program's"
        decomposition = str(module.decomposition())
        assert decomposition in program and decomposition in exported
        assert (decomposition != "") == (cfg.get("schedule") in ("streamk", "splitk"))
        args_program = str(module.arguments("A.get()", "B.get()", "d_ptr_")).strip("\n")
        args_export = str(module.arguments("a", "b", "d")).strip("\n")
        assert args_program in program and args_export in exported
        assert "int main(" not in exported and "kp_sycl_common.hpp" not in exported
        assert "verify" not in exported and "fill_random" not in exported
        assert f'std::string mode = "{ctx["default_mode"]}";' in exported
        assert "op.initialize(args, workspace, c.queue)" in exported and "op.run(c.queue)" in exported
    knobs = {(e["dims"]["M"]): e["knobs"] for e in doc["entries"]}
    assert knobs[512] == {"mode": "splitk", "splits": 4} and knobs[2048] == {"mode": "dp", "splits": 1}
    dispatch = (xe_export / "include" / NAME / "dispatch.hpp").read_text()
    assert '"splitk", 4' in dispatch and '"dp", 1' in dispatch


def test_operators_declare_the_four_ops_with_xpu_and_cpu_impls(xe_export):
    ops = (xe_export / "csrc" / "ops.cpp").read_text()
    for schema in ("gemm(Tensor a, Tensor b) -> Tensor", "explain(Tensor a, Tensor b) -> str",
                   "set_fallback(str policy) -> ()", "get_fallback() -> str"):  # fmt: skip
        assert f'm.def("{schema}"' in ops
    assert f'TORCH_LIBRARY_IMPL({NAME}, XPU, m) {{ m.impl("gemm", &{NAME}::gemm); }}' in ops
    assert f'TORCH_LIBRARY_IMPL({NAME}, CPU, m) {{ m.impl("gemm", &{NAME}::gemm); }}' in ops
    assert "c10::xpu::getCurrentXPUStream(a.get_device()).queue()" in ops
    # every rejection goes to at::matmul, or raises under `error`, before a kernel is touched
    for why in ("XPU tensors only", "different dtypes", "dtype not in bfloat16, float16", "16-byte aligned",
                "empty problem", "neither row-major"):  # fmt: skip
        assert why in ops
    gemm_body = ops[ops.index("at::Tensor gemm(") : ops.index("std::string explain(")]
    assert gemm_body.index("return at::matmul(a, b);") < gemm_body.index("gemm_run(")
    assert "How::error" in gemm_body and "fallback=error" in gemm_body
    init = (xe_export / "python" / NAME / "__init__.py").read_text()
    assert f'@torch.library.register_fake("{NAME}::gemm")' in init
    compile(init, "__init__.py", "exec")


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_cmake_configures_the_header_target_without_icpx(xe_export, tmp_path):
    if Path(os.environ.get("CXX", "")).name.startswith("icpx"):
        pytest.skip("CXX is icpx: the configure would build the kernels")
    r = subprocess.run(
        ["cmake", "-S", str(xe_export), "-B", str(tmp_path / "b")], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert f"only the header target {NAME}::dispatch" in r.stdout
    assert "need icpx" in r.stdout
    cache = (tmp_path / "b" / "CMakeCache.txt").read_text()
    assert "KPXE_AOT_DEVICE:STRING=bmg-g21,bmg-g31" in cache


def test_pip_install_without_icpx_names_icpx_and_the_target(xe_export, tmp_path):
    """pip runs the export's own backend; without icpx it stops before CMake with a message that names
    icpx and the target (not a compiler error)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CXX", "SYCL_TLA_DIR")}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not (Path(p) / "icpx").exists()
    )
    src = tmp_path / "src"
    shutil.copytree(xe_export, src)
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", str(tmp_path / "site"), str(src)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    text = r.stdout + r.stderr
    assert r.returncode != 0
    assert "compile with icpx" in text and "Intel Xe target bmg" in text, text[-3000:]
    assert not (src / "build" / "cmake" / "CMakeCache.txt").exists()  # stopped before CMake


def test_build_backend_checks_sycl_tla_after_icpx(xe_export, tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "icpx"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("SYCL_TLA_DIR", str(tmp_path / "nothing"))
    monkeypatch.syspath_prepend(str(xe_export))
    sys.modules.pop("build_backend", None)
    import build_backend  # the export's PEP 517 backend

    try:
        with pytest.raises(RuntimeError, match="SYCL_TLA_DIR"):
            build_backend.check_toolchain()
        monkeypatch.setenv("SYCL_TLA_DIR", str(tmp_path))
        (tmp_path / "include" / "cutlass").mkdir(parents=True)
        (tmp_path / "include" / "cutlass" / "cutlass.h").write_text("")
        assert build_backend.check_toolchain() == str(fake)
    finally:
        sys.modules.pop("build_backend", None)


# --- host-side compile (the tuning programs' CI check, tests/plugins/sycl/test_sycl_host_syntax.py) ---


def _host_headers(request):
    from tests.support.sycl_downloads import Unavailable, cache_root, sycl_include, sycl_tla_tree

    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("needs g++")
    cache = cache_root(request.config)
    try:
        return gxx, sycl_include(cache), sycl_tla_tree(cache, applications=False)[0]
    except Unavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.slow
def test_exported_kernel_sources_pass_the_host_compile(xe_export, request, tmp_path):
    """Every kernel TU and the kernels table, one unit (each kernel lives in its own namespace), through
    the same g++ host pass and flags as the tuning programs."""
    from tests.plugins.sycl.test_sycl_host_syntax import _compile, _gxx_argv

    gxx, sycl_inc, tree = _host_headers(request)
    sources = sorted((xe_export / "src" / "kernels").glob("k*.cpp")) + [
        xe_export / "src" / "kernels_table.cpp"
    ]
    assert len(sources) == len(CASES) + 1
    unit = tmp_path / "unit.cpp"
    unit.write_text("".join(f'#include "{s}"\n' for s in sources))
    argv = _gxx_argv(gxx, tree, sycl_inc, "gemm", tmp_path, unit)
    argv.insert(-1, f"-I{xe_export / 'include'}")
    errors = _compile(argv)
    assert not errors, "\n".join(errors[:10])


@pytest.mark.slow
def test_exported_operators_pass_the_host_compile(xe_export, request, tmp_path):
    """csrc/ops.cpp against the installed torch's headers (its c10/xpu headers; the XPU build's generated
    xpu_cmake_macros.h is a one-line stand-in when torch is a CPU build) and the SYCL headers."""
    gxx, sycl_inc, _ = _host_headers(request)
    try:
        import torch.utils.cpp_extension as cpp
    except ImportError:
        pytest.skip("needs torch (its headers)")
    inc = [Path(p) for p in cpp.include_paths()]
    if not (inc[0] / "c10" / "xpu" / "XPUStream.h").exists():
        pytest.skip("this torch ships no c10/xpu headers")
    stub = tmp_path / "stub"
    if not (inc[0] / "c10" / "xpu" / "impl" / "xpu_cmake_macros.h").exists():
        (stub / "c10" / "xpu" / "impl").mkdir(parents=True)
        (stub / "c10" / "xpu" / "impl" / "xpu_cmake_macros.h").write_text(
            "#pragma once\n#define C10_XPU_BUILD_SHARED_LIBS\n"
        )
    import inspect

    std = "-std=c++20" if "-std=c++20" in inspect.getsource(cpp) else "-std=c++17"
    argv = [gxx, std, "-fsyntax-only", "-w", "-DSYCL_DISABLE_FSYCL_SYCLHPP_WARNING", f"-I{stub}",
            *[f"-I{p}" for p in inc], f"-I{sycl_inc}", f"-I{xe_export / 'include'}", str(xe_export / "csrc" / "ops.cpp")]  # fmt: skip
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("icpx") is None, reason="needs icpx (Intel oneAPI DPC++): no device compile without it"
)
def test_icpx_builds_the_kernels_library(xe_export, request, tmp_path):
    from tests.support.sycl_downloads import Unavailable, cache_root, sycl_tla_tree

    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("needs cmake and ninja")
    try:
        tree, _ = sycl_tla_tree(cache_root(request.config), applications=False)
    except Unavailable as exc:
        pytest.skip(str(exc))
    root = tree.include.parent
    build = tmp_path / "b"
    r = subprocess.run(["cmake", "-S", str(xe_export), "-B", str(build), "-G", "Ninja", "-DCMAKE_CXX_COMPILER=icpx",
                        f"-DSYCL_TLA_DIR={root}", f"-D{NAME.upper()}_WITH_TORCH=OFF"],
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    r = subprocess.run(
        ["cmake", "--build", str(build), "--target", f"{NAME}_kernels"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout[-5000:]
    assert list(build.glob(f"lib{NAME}_kernels.a"))


def test_cmake_lists_carry_the_tuners_sycl_flags(xe_export):
    from kernelpilot.dsl_plugins.sycl import sycl_tla

    cmake = (xe_export / "CMakeLists.txt").read_text()
    flags = re.search(r"set\(KPXE_SYCL_FLAGS (.*)\)", cmake)
    assert flags is not None
    listed = re.findall(r'"([^"]*)"', flags.group(1))
    assert listed == [f for f in sycl_tla.compile_flags() if not f.startswith("-std=")]
    assert 'CMAKE_CXX_COMPILER_ID STREQUAL "IntelLLVM"' in cmake
    assert "-spirv-ext=" + ",".join(sycl_tla.SPIRV_EXTENSIONS) in cmake
    assert "-device ${KPXE_AOT_DEVICE}" in cmake and "c10_xpu" in cmake and "torch_xpu" in cmake
