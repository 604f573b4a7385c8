"""Host-side compile check of the golden programs with g++ against the real sycl-tla and SYCL headers.

Why: without icpx nothing compiles the device code, but most template mistakes (wrong Arguments
structures, non-default-constructible members, misspelled types, a macro such as cute's
``#define printf sycl::...::printf`` breaking ``std::printf``) are host-side and g++ finds them.  This
check found two real bugs in the templates before any Intel hardware saw them.

What it is not: a device compile.  g++ parses and instantiates the host pass only (code under
``__SYCL_DEVICE_ONLY__`` -- DPAS, block-2D loads -- is skipped), with ``-fpermissive -w`` because g++ is
stricter than clang about some of CUTLASS's own member typedefs.

Needs: g++, sycl-tla headers (``SYCL_TLA_DIR``; a checkout for the FA programs) and the SYCL headers in
``KP_SYCL_INCLUDE`` (a folder holding ``sycl/sycl.hpp``, e.g. the ``include/`` folder of the
``intel-sycl-rt`` wheel: ``pip download --no-deps intel-sycl-rt`` and unzip ``*.data/data/include``, or
``$ONEAPI_ROOT/compiler/latest/include``).  About one minute per program, hence ``slow``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelpilot.dsl_plugins.sycl import programs, sycl_tla
from kernelpilot.dsl_plugins.sycl.kernels import all_kernels
from tests.support import REPO

pytestmark = pytest.mark.slow
GOLDEN = REPO / "tests" / "data" / "sycl" / "golden"
KINDS = {
    "gemm_bf16_default_bmg": "gemm",
    "gemm_s8_splitk_rc_pvc": "gemm",
    "grouped_gemm_f16_bmg": "grouped_gemm",
    "moe_gemm_bf16_bmg": "moe_gemm",
    "fa_prefill_bf16_causal_hd128_bmg": "fa_prefill",
    "fa_decode_e4m3_persistent_hd64_bmg": "fa_decode",
}


#: more element types, layouts and schedules than the goldens (rendered on the fly)
EXTRA = {
    "gemm_s4": ("gemm", {"M": 1024, "N": 1024, "K": 1024}, "s4", {"wg": [256, 256, 64], "sg": [8, 4, 1], "stages": 2}),
    "gemm_bf16_u4_rc": ("gemm", {"M": 1024, "N": 1024, "K": 1024, "layout": "rc"}, {"a": "bf16", "b": "u4"},
                        {"wg": [128, 256, 32], "sg": [4, 8, 1], "stages": 3}),
    "gemm_tf32_cr_persistent": ("gemm", {"M": 1024, "N": 1024, "K": 1024, "layout": "cr"}, "tf32",
                                {"wg": [256, 128, 32], "sg": [8, 4, 1], "stages": 3, "schedule": "persistent"}),
    "gemm_e5m2_streamk_bf16_out": ("gemm", {"M": 1024, "N": 1024, "K": 1024, "out_dtype": "bf16"}, "e5m2",
                                   {"wg": [256, 256, 32], "sg": [8, 4, 1], "stages": 2, "schedule": "streamk"}),
    "grouped_f16_e2m1": ("grouped_gemm", {"shapes": [[256, 512, 256]]}, {"a": "f16", "b": "e2m1"},
                         {"wg": [256, 256, 64], "sg": [8, 4, 1], "stages": 2}),
}  # fmt: skip


def _host_compile(kind: str, source: str, tmp_path: Path) -> None:
    gxx = shutil.which("g++")
    sycl_inc = os.environ.get("KP_SYCL_INCLUDE")
    if gxx is None:
        pytest.skip("needs g++")
    if not sycl_inc or not (Path(sycl_inc) / "sycl" / "sycl.hpp").exists():
        pytest.skip("set KP_SYCL_INCLUDE to a folder with sycl/sycl.hpp (see this module's docstring)")
    tree = sycl_tla.find_sycl_tla()
    if tree is None:
        pytest.skip("set SYCL_TLA_DIR to sycl-tla headers")
    try:
        sycl_tla.check_tree_for_kind(tree, kind)
    except Exception as exc:  # noqa: BLE001
        pytest.skip(str(exc))
    src = tmp_path / f"{kind}.cpp"
    src.write_text(source)
    (tmp_path / programs.COMMON_HEADER).write_text(programs.common_header())
    includes = [f"-I{p}" for p in sycl_tla.include_dirs(tree, kind)] + [f"-I{sycl_inc}", f"-I{tmp_path}"]
    cmd = [
        gxx, "-std=c++17", "-fsyntax-only", "-fpermissive", "-w", "-DSYCL_DISABLE_FSYCL_SYCLHPP_WARNING",
        "-DCUTLASS_ENABLE_SYCL", "-DSYCL_INTEL_TARGET", *includes, str(src),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    errors = [line[:500] for line in proc.stderr.splitlines() if "error" in line]
    assert proc.returncode == 0 and not errors, "\n".join(errors[:10])


@pytest.mark.parametrize("name", sorted(EXTRA))
def test_more_dtypes_layouts_and_schedules_pass_the_host_compile(name: str, tmp_path: Path) -> None:
    from kernelpilot.targets import get_target_model

    kind, dims, dtype, raw = EXTRA[name]
    kernel = {k.kind: k for k in all_kernels()}[kind]
    model = get_target_model("bmg")
    problem = kernel.validate_problem(dims, dtype, name)
    cfg = model.parse_config({"kernel": kind, "dtype": dtype, **raw})
    assert model.check(cfg, problem).valid
    _host_compile(
        kind, programs.render_program(kind, cfg, problem, "bmg", "host-check")[f"{kind}.cpp"], tmp_path
    )


@pytest.mark.parametrize("name", sorted(KINDS))
def test_golden_program_passes_the_host_compile(name: str, tmp_path: Path) -> None:
    _host_compile(KINDS[name], (GOLDEN / f"{name}.cpp").read_text(), tmp_path)
