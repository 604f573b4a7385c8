"""`kernelpilot export` for an Intel Xe target: dispatch header, CMake target, tile_shapes.json (the
kernel library and XPU operators: test_export_xe_extension.py).

The run document is synthetic (configs the bmg model enumerates, made-up times): no Xe hardware has
measured anything here, and nothing below reads a time as a result.  What is checked is the export's
bookkeeping: the header compiles as plain C++ and selects what the table says, tile_shapes.json holds
the tuned tiles as `kernelpilot tune` writes them, CMake configures the header target without icpx.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.xe_runs import bmg_gemm_workload, write_bmg_run

SHAPES = [(4096, 4096, 4096), (512, 14336, 4096), (8, 4096, 4096)]


def _xe_run(tmp: Path) -> Path:
    from kernelpilot.targets import get_target_model

    model = get_target_model("bmg")
    workloads = []
    for i, (m, n, k) in enumerate(SHAPES):
        problem = {"M": m, "N": n, "K": k, "layout": "rr", "dtype": "bf16"}
        cfg = list(model.enumerate("gemm", "bf16", problem))[3 * i]
        runtime = {"mode": "dp", "splits": 1} if i == 0 else {}
        workloads.append(bmg_gemm_workload(i, (m, n, k), "rr", "bf16", cfg.as_dict(), cfg.label(), runtime))
    return write_bmg_run(tmp, workloads)


@pytest.fixture(scope="module")
def xe_export(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("xe")
    r = run_cli(
        "export", str(_xe_run(tmp)), "--out", str(tmp / "out"), "--name", "kpxe", "--fallback", "nearest"
    )
    assert r.returncode == 0, r.stderr
    return tmp / "out"


def test_xe_export_writes_tile_shapes_as_tune_does(xe_export):
    from kernelpilot.tile_tuner.report import tile_shapes

    run = json.loads(next(xe_export.parent.glob("xe_run.json")).read_text())
    exported = json.loads((xe_export / "tile_shapes.json").read_text())
    assert sorted(exported, key=json.dumps) == sorted(tile_shapes(run), key=json.dumps) and len(exported) == 3
    doc = json.loads((xe_export / "dispatch.json").read_text())
    assert (
        doc["target"] == "bmg"
        and len(doc["entries"]) == 3
        and doc["entries"][0]["origin"]["run_id"] == "synthetic"
    )
    assert not list(xe_export.rglob("*.cu"))  # no CUDA sources for an Xe target
    assert (xe_export / "src" / "kernels").is_dir()  # the sycl-tla kernels (test_export_xe_extension.py)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_xe_dispatch_header_is_plain_cpp_and_selects(xe_export, tmp_path):
    doc = json.loads((xe_export / "dispatch.json").read_text())
    by_m = {e["dims"]["M"]: e for e in doc["entries"]}
    src = tmp_path / "t.cpp"
    src.write_text(
        '#include "kpxe/dispatch.hpp"\n#include <cstdio>\nint main() { using namespace kpxe;\n'
        + "".join(
            f'  {{ auto c = select_gemm("bf16", "rr", {m}, {n}, {k}, Fallback::{p}); std::printf("%s %s %s %d\\n", '
            f'to_string(c.how), c.config >= 0 ? kConfigs[c.config].id : "-", c.mode, c.splits); }}\n'
            for p, (m, n, k) in [("vendor", SHAPES[0]), ("nearest", (4000, 4096, 4096)), ("vendor", (4000, 4096, 4096)),
                                 ("error", (4000, 4096, 4096)), ("nearest", (4000, 4097, 4096))]
        )
        + "  return 0; }\n"
    )  # fmt: skip
    exe = tmp_path / "t"
    cc = subprocess.run(["g++", "-std=c++17", "-Wall", "-Werror", f"-I{xe_export / 'include'}", str(src), "-o", str(exe)],
                        capture_output=True, text=True)  # fmt: skip
    assert cc.returncode == 0, cc.stderr
    lines = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    assert lines[0] == f"tuned {by_m[4096]['kernel']} dp 1"
    assert lines[1] == f"nearest {by_m[4096]['kernel']} default 1"
    assert lines[2:] == [
        "vendor - default 1",
        "error - default 1",
        "vendor - default 1",
    ]  # N=4097: none legal


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_xe_cmake_configures_the_header_target_without_icpx(xe_export, tmp_path):
    r = subprocess.run(
        ["cmake", "-S", str(xe_export), "-B", str(tmp_path / "b")], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert "only the header target kpxe::dispatch" in r.stdout


@pytest.mark.slow
def test_xe_table_program_passes_the_host_compile(xe_export):
    """The exported SYCL program through g++'s host pass against the SYCL headers (the check the sycl
    backend uses for its programs; KP_SYCL_INCLUDE: a folder holding sycl/sycl.hpp)."""
    import os

    sycl_inc = os.environ.get("KP_SYCL_INCLUDE")
    if not sycl_inc or shutil.which("g++") is None:
        pytest.skip("needs g++ and KP_SYCL_INCLUDE (the intel-sycl-rt wheel's include/ folder)")
    r = subprocess.run(
        ["g++", "-std=c++17", "-fsyntax-only", "-w", "-isystem", sycl_inc, f"-I{xe_export / 'include'}",
         str(xe_export / "examples" / "table.cpp")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]


def test_xe_export_where_the_vendor_won_every_shape_compiles_and_routes_to_vendor(tmp_path):
    """A run whose confirmation found the vendor library faster on every shape exports no kernel; the
    header must still be ISO C++ (no zero-size array, which GCC and Clang accept
    only as an extension: hence -pedantic-errors) and send every tuned shape to the vendor."""
    run = json.loads(_xe_run(tmp_path).read_text())
    for w in run["workloads"]:
        w["best"].update(confirmed=True, confirmed_ms=w["best"]["time_ms"])
        w["vendor"] = {"backend": "oneDNN", "confirmed_ms": 0.5 * w["best"]["time_ms"]}
        w["vs_vendor"] = 0.5
    path = tmp_path / "all_vendor.json"
    path.write_text(json.dumps(run))
    out = tmp_path / "out"
    r = run_cli("export", str(path), "--out", str(out), "--name", "kpxv")
    assert r.returncode == 0, r.stderr
    doc = json.loads((out / "dispatch.json").read_text())
    assert doc["kernels"] == [] and all(e["kernel"] is None for e in doc["entries"])
    src = tmp_path / "v.cpp"
    m, n, k = SHAPES[0]
    src.write_text(
        '#include "kpxv/dispatch.hpp"\n#include <cstdio>\nint main() { using namespace kpxv;\n'
        f'  auto c = select_gemm("bf16", "rr", {m}, {n}, {k}, Fallback::nearest);\n'
        '  std::printf("%s %d %d\\n", to_string(c.how), c.config, kNumConfigs);\n  return 0; }\n'
    )
    exe = tmp_path / "v"
    cc = subprocess.run(["g++", "-std=c++17", "-Wall", "-Werror", "-pedantic-errors", f"-I{out / 'include'}", str(src), "-o", str(exe)],
                        capture_output=True, text=True)  # fmt: skip
    assert cc.returncode == 0, cc.stderr
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split() == [
        "vendor",
        "-1",
        "0",
    ]
