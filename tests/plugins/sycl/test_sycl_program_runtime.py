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


GROUPED_NARROW = {"shapes": [[4096, 4096, 16], [4096, 16, 4096], [1024, 4096, 64], [2048, 1024, 128]]}


def test_grouped_program_verifies_narrow_pitches_when_the_timed_problem_has_them() -> None:
    """Row pitches under 64 B are a model warning (xe.pitch_64), not a refusal; the program then verifies
    a check problem of narrow-pitch groups besides the timed one (examples/xe_grouped_gemm.yaml has K=16
    groups: 32-byte rows of A)."""
    src, cfg, _ = _render("grouped_gemm", "bmg", GROUPED_NARROW, "bf16")
    main = _body(src, "int main(int argc, const char** argv)")
    guard = main.index("if (timed_narrow) {")
    narrow = main[guard : main.index("double operand_bytes = 0;")]
    assert 'kp::check_entry("narrow_pitch", shapes_json(narrow_shapes), c)' in narrow
    assert "all_passed &= c.passed();" in narrow
    wg = cfg.as_dict()["wg"]
    assert f"narrow_pitch_shapes({wg[0]}, {wg[1]}, {wg[2]}, align_m, align_n, align_k)" in narrow
    # decided before any timing, and a failure stops the run as wrong_result
    assert guard < main.index("res.verification_passed = all_passed;") < main.index("kp::time_with(")


@pytest.mark.parametrize(
    ("dtype", "layout"), [("bf16", "rr"), ("bf16", "cc"), ("s8", "rc"), ({"a": "bf16", "b": "u4"}, "rr")]
)
def test_narrow_pitch_check_groups_are_legal_and_narrow(tmp_path: Path, dtype, layout: str) -> None:
    """The program's own narrow-pitch code, compiled with g++: every check group is legal to
    can_implement (contiguous extents multiples of 16 bytes), every operand reaches its narrowest legal
    pitch in some group, group 0 has a partial M tile, and the example's K=16 group is detected while a wide
    group is not."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("needs g++")
    shapes = GROUPED_NARROW if isinstance(dtype, str) else {"shapes": [[4096, 4096, 16], [1024, 4096, 4096]]}
    src, cfg, problem = _render("grouped_gemm", "bmg", {**shapes, "layout": layout}, dtype)
    from kernelpilot.hw_models.dtypes import DTYPE_BITS, parse_dtype

    pair = parse_dtype(problem["dtype"])
    out = problem.get("out_dtype", "s32" if pair.a in ("s8", "u8") else "f32")
    bits_a, bits_b, bits_d = DTYPE_BITS[pair.a], DTYPE_BITS[pair.b], DTYPE_BITS.get(out, 32)  # s32: 32
    assert f"using ElementOutput = {programs.dtypes.CPP_TYPES[out]};" in src
    a_row, b_row = layout[0] == "r", layout[1] == "r"
    align_a, align_b, align_d = 128 // bits_a, 128 // bits_b, 128 // bits_d
    align_m = 1 if a_row else align_a
    align_n = max(align_b if b_row else 1, align_d)
    align_k = max(align_a if a_row else 1, 1 if b_row else align_b)
    wg = cfg.as_dict()["wg"]
    parts = [
        _cxx_decl(src, "bool narrow_pitch("),
        _cxx_decl(src, "std::vector<std::array<int, 3>> narrow_pitch_shapes("),
    ]
    flags = f"{bits_a}, {bits_b}, {bits_d}, {str(a_row).lower()}, {str(b_row).lower()}"
    prog = tmp_path / "pitch.cpp"
    prog.write_text(
        "#include <array>\n#include <cstdint>\n#include <cstdio>\n#include <vector>\n" + "\n".join(parts) + "\n"
        "int main() {\n"
        f"  for (auto g : narrow_pitch_shapes({wg[0]}, {wg[1]}, {wg[2]}, {align_m}, {align_n}, {align_k}))\n"
        f'    std::printf("%d %d %d %d\\n", g[0], g[1], g[2], int(narrow_pitch(g[0], g[1], g[2], {flags})));\n'
        f'  std::printf("%d %d\\n", int(narrow_pitch(4096, 4096, 16, {flags})), int(narrow_pitch(1024, 4096, 4096, {flags})));\n'
        "}\n"
    )  # fmt: skip
    exe = tmp_path / "pitch"
    build = subprocess.run([gxx, "-std=c++17", str(prog), "-o", str(exe)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    lines = [list(map(int, line.split())) for line in subprocess.run(
        [str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()]  # fmt: skip
    *groups, example = lines
    assert len(groups) == 3 and all(flag == 1 for *_, flag in groups)
    narrowest = {"A": 64, "B": 64, "D": 64}
    for m, n, k, _ in groups:
        assert (k % align_a == 0 if a_row else m % align_a == 0) and (
            n % align_b == 0 if b_row else k % align_b == 0
        )
        assert n % align_d == 0
        pitches = {
            "A": (k if a_row else m) * bits_a // 8,
            "B": (n if b_row else k) * bits_b // 8,
            "D": n * bits_d // 8,
        }
        narrowest = {side: min(narrowest[side], p) for side, p in pitches.items()}
    # each operand reaches the narrowest pitch a legal group can have (16 B unless another operand's
    # alignment forces a wider extent, as a 4-bit B does for N)
    legal = {
        "A": (align_k if a_row else align_m) * bits_a // 8,
        "B": (align_n if b_row else align_k) * bits_b // 8,
        "D": align_n * bits_d // 8,
    }
    assert narrowest == {side: min(64, p) for side, p in legal.items()} and min(narrowest.values()) <= 32
    assert groups[0][0] % wg[0] != 0  # a partial M tile
    # the example's K=16 group: 32-byte rows of row-major bf16 A; 1024x4096x4096 is wide everywhere
    assert example[1] == 0
    if layout[0] == "r" and bits_a == 16:
        assert example[0] == 1
