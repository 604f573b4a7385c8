"""Run-time behaviour of the rendered Xe programs that no machine here can execute, asserted on the source.

Each test pins one defect a line-by-line reading against sycl-tla v0.9.1 predicted: stream-K / split-K
relaunches that would spin on never-reset barrier flags, causal flash-attention check problems with more
query than key rows (rows the kernel never writes), NaN slipping through the comparison under icpx's
default fast floating-point model, and MoE scheduler set-up inside the timed loop.  The NaN test compiles
and runs the program's own comparison code with g++ under ``-ffast-math``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelpilot.dsl_plugins.sycl import programs
from kernelpilot.dsl_plugins.sycl.kernels import all_kernels
from kernelpilot.targets import get_target_model

VERSION = "sycl-tla 0.9.1 (cutlass 4.2.1)"
KERNELS = {k.kind: k for k in all_kernels()}


def _render(kind: str, target: str, dims: dict, dtype, raw: dict | None = None) -> tuple[str, object, dict]:
    model = get_target_model(target)
    problem = KERNELS[kind].validate_problem(dims, dtype, "test")
    cfg = (
        model.default_config(kind, problem["dtype"], problem)
        if raw is None
        else model.parse_config({"kernel": kind, "dtype": dtype, **raw})
    )
    return programs.render_program(kind, cfg, problem, target, VERSION)[f"{kind}.cpp"], cfg, problem


def _span(src: str, signature: str) -> tuple[int, int, int]:
    """(start of signature, opening brace, closing brace) of the first definition after ``signature``."""
    start = src.index(signature)
    i = src.index("{", start)
    depth = 0
    for j in range(i, len(src)):
        depth += {"{": 1, "}": -1}.get(src[j], 0)
        if depth == 0:
            return start, i, j
    raise AssertionError(f"unbalanced body after {signature!r}")


def _body(src: str, signature: str) -> str:
    """The brace-matched body that follows ``signature``, code only (comments may name calls)."""
    _, i, j = _span(src, signature)
    return re.sub(r"//[^\n]*", "", src[i + 1 : j])


GEMM_RAW = {"wg": [256, 256, 32], "sg": [8, 4, 1], "stages": 2}


@pytest.mark.parametrize("schedule", ["streamk", "splitk"])
def test_stream_k_programs_reinitialize_before_every_launch(schedule: str) -> None:
    """GemmUniversalAdapter::run() without arguments only relaunches; the barrier flags are zeroed in
    initialize() alone, so every launch (check, warm-up, timed) must re-initialize first."""
    src, _, _ = _render(
        "gemm", "bmg", {"M": 512, "N": 512, "K": 8192}, "bf16", {**GEMM_RAW, "schedule": schedule}
    )
    run = _body(src, "void run()")
    assert "op.initialize(*launch_arguments, workspace.get())" in run
    assert run.index("op.initialize(") < run.index("op.run()")
    # the arguments are the ones can_implement accepted, kept from initialize()
    init = _body(src, "void initialize(const cutlass::KernelHardwareInfo& hw_info, const RunOptions& run)")
    assert "launch_arguments.reset(new typename Gemm::GemmKernel::Arguments(arguments));" in init
    # the timed loop goes through run(), never op.run() directly
    assert "slots[i % rotate]->run();" in src and re.sub(r"//[^\n]*", "", src).count("op.run()") == 1


def test_data_parallel_programs_launch_without_reinitializing() -> None:
    src, _, _ = _render("gemm", "bmg", {"M": 512, "N": 512, "K": 512}, "bf16", GEMM_RAW)
    run = _body(src, "void run()")
    assert "op.initialize" not in run and "launch_arguments" not in src


def _cxx_int(expr: str, names: dict[str, int]) -> int:
    """Evaluate one of the template's integer size expressions (min/max/ternary over positive ints)."""
    py = expr.replace("std::min", "min").replace("std::max", "max").replace("kPersistent", "False")
    py = re.sub(r"(\w+) \? (.+?) : (.+)", r"(\2 if \1 else \3)", py).replace("/", "//")
    for name, value in names.items():
        py = py.replace(name, str(value))
    return int(eval(py, {"min": min, "max": max, "False": False}))  # noqa: S307 (our own template text)


def _check_dims(src: str, seq_qo: int) -> tuple[int, int]:
    """The program's check-problem sizes (c.sq, c.skv) for a timed seq_qo, read from the source."""
    sq = _cxx_int(re.search(r"c\.sq = (.+);", src).group(1), {"d.sq": seq_qo})
    skv = _cxx_int(re.search(r"c\.skv = (.+);", src).group(1), {"c.sq": sq})
    return sq, skv


def test_causal_attention_check_problem_has_no_more_query_than_key_rows() -> None:
    """With causal masking and seq_qo > seq_kv sycl-tla skips every subgroup whose first row is fully
    masked and never writes its rows; the check problem must not create that case for any planned config
    (the hd128 default 256x32x32 used to check 261 query rows against 71 keys)."""
    model = get_target_model("bmg")
    dims = {"head_dim": 128, "batch": 1, "num_heads_q": 32, "num_heads_kv": 8, "seq_qo": 4096, "seq_kv": 4096,
            "causal": True}  # fmt: skip
    problem = KERNELS["fa_prefill"].validate_problem(dims, "bf16", "test")
    configs = list(model.enumerate("fa_prefill", problem["dtype"], problem))
    configs.append(model.default_config("fa_prefill", problem["dtype"], problem))
    assert len(configs) > 1
    for cfg in configs:
        src = programs.render_program("fa_prefill", cfg, problem, "bmg", VERSION)["fa_prefill.cpp"]
        qk = cfg.as_dict()["qk"]
        for seq_qo in (1, 7, qk[0] - 1, 4096):
            sq, skv = _check_dims(src, seq_qo)
            assert sq <= skv, (cfg.label(), seq_qo, sq, skv)
            assert skv % qk[1] != 0, "the check problem keeps a partial KV tile"
            assert sq == min(seq_qo, qk[0] + 5)


def test_attention_verification_skips_rows_the_kernel_leaves_unwritten() -> None:
    src, _, _ = _render(
        "fa_prefill", "bmg",
        {"head_dim": 64, "batch": 1, "num_heads_q": 8, "seq_qo": 1024, "seq_kv": 512, "causal": True}, "bf16",
    )  # fmt: skip
    verify = _body(src, "kp::Comparison verify_rows(")
    # fully masked rows are skipped before a reference is built for them, rows below are compared
    assert verify.index("if (kCausal && i < discard) continue;") < verify.index("std::vector<float> ref(")
    # the host reference has no infinities: the build may assume none exist
    assert "INFINITY" not in verify and "isinf" not in verify


def _cxx_decl(text: str, signature: str) -> str:
    start, _, end = _span(text, signature)
    return text[start : end + 1] + (";" if signature.startswith("struct") else "")


def test_comparison_counts_nan_and_inf_as_mismatches_under_fast_math(tmp_path: Path) -> None:
    """icpx defaults to -fp-model=fast; with finite-math assumptions a std::isfinite test folds to true and
    a NaN counts as neither a mismatch nor an error.  The programs' own comparison code, compiled with
    g++ -O2 -ffast-math, must still flag NaN and infinity."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("needs g++")
    header = programs.common_header()
    parts = [_cxx_decl(header, "inline bool is_finite_bits"), _cxx_decl(header, "struct Comparison"),
             _cxx_decl(header, "inline Comparison compare_host")]  # fmt: skip
    src = tmp_path / "cmp.cpp"
    src.write_text(
        "#include <algorithm>\n#include <cmath>\n#include <cstdint>\n#include <cstdio>\n#include <cstring>\n"
        "#include <limits>\n#include <vector>\nnamespace kp {\n" + "\n".join(parts) + "\n}\n"
        "int main(int argc, char**) {\n"
        "  volatile float zero = argc - 1;  // not foldable: 0 at run time\n"
        "  float nan = zero / zero, inf = 1.0f / zero;\n"
        "  auto a = kp::compare_host({1.0f, nan, 3.0f}, {1.0f, 2.0f, 3.0f}, 1e-2, 1e-2);\n"
        "  auto b = kp::compare_host({inf}, {1.0f}, 1e-2, 1e-2);\n"
        "  auto c = kp::compare_host({1.0f}, {1.0f}, 1e-2, 1e-2);\n"
        '  std::printf("%zu %zu %zu %d\\n", a.mismatches, b.mismatches, c.mismatches, int(c.passed()));\n'
        "}\n"
    )
    exe = tmp_path / "cmp"
    build = subprocess.run(
        [gxx, "-std=c++17", "-O2", "-ffast-math", str(src), "-o", str(exe)], capture_output=True, text=True
    )
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1", "1", "0", "1"], out


def test_json_numbers_are_null_for_nan() -> None:
    header = programs.common_header()
    assert 'if (!is_finite_bits(v)) return "null";' in _cxx_decl(header, "inline std::string json_number")
    assert "std::isfinite" not in header.split("namespace kp {", 1)[1].replace("fold std::isfinite", "")


def test_moe_scheduler_setup_stays_out_of_the_timed_launches() -> None:
    src, _, _ = _render(
        "moe_gemm", "bmg", {"N": 2880, "K": 2880, "num_experts": 8, "total_tokens": 4096}, "bf16"
    )
    launch = _body(src, "void launch()")
    assert "to_underlying_arguments" not in launch and "get_grid_shape" not in launch
    prepare = _body(src, "void prepare(const cutlass::KernelHardwareInfo& hw_info)")
    assert "Scheduler::to_underlying_arguments" in prepare and "Scheduler::get_grid_shape" in prepare
    assert "slots[i % rotate]->launch(); }" in src
    # every problem is prepared before its first launch
    main = src[src.index("int main(") :]
    assert main.index("check.prepare(hw_info);") < main.index("check.launch();")
    assert main.index("slots.back()->prepare(hw_info);") < main.index("timed.launch();")


def test_moe_program_uses_the_patched_headers_that_clear_the_accumulator() -> None:
    """sycl-tla v0.9.1's ``MoE::moe_gemm`` only accumulates into a fragment it never clears
    (examples/12_xe20_moe_gemm_cute_interface/moe_gemms.hpp:105,151): every work tile would start from
    whatever the registers held.  The program ships patched copies and includes them, not upstream's."""
    kind = "moe_gemm"
    model = get_target_model("bmg")
    problem = KERNELS[kind].validate_problem(
        {"N": 2880, "K": 2880, "num_experts": 8, "total_tokens": 4096}, "bf16", "test"
    )
    sources = programs.render_program(
        kind, model.default_config(kind, "bf16", problem), problem, "bmg", VERSION
    )
    src = sources["moe_gemm.cpp"]
    includes = re.findall(r'^#include "([^"]+)"', src, re.M)
    assert "kp_moe_grouped_gemm.hpp" in includes and "moe_grouped_gemm.hpp" not in includes
    assert "moe_gemms.hpp" not in includes
    grouped = sources["kp_moe_grouped_gemm.hpp"]
    grouped_includes = re.findall(r'^#include "([^"]+)"', grouped, re.M)
    assert "kp_moe_gemms.hpp" in grouped_includes and "moe_gemms.hpp" not in grouped_includes
    body = _body(sources["kp_moe_gemms.hpp"], "CUTE_DEVICE void moe_gemm(")
    fragment = body.index("auto tCrD = thr_mma.partition_sg_fragment_C(gD);")
    cleared = body.index("clear(tCrD);")
    k_loop = body.index("for (int k_tile = k_start_idx; k_tile < k_tile_count;")
    assert fragment < cleared < k_loop
    assert body.index("cute::gemm(mma, tCrA, tCrB, tCrD);") > k_loop
    # the patch is the only change to the algorithm: one clear, the same accumulate and store
    assert body.count("clear(") == 1 and body.count("cute::gemm(") == 1
