"""Workload validation (Xe-Forge dim names, clear errors), program command lines, run-time variants,
FLOP counts, and the output parsers on samples of sycl-tla's and our own formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.dsl_plugins.sycl import output_parser, problems
from kernelpilot.dsl_plugins.sycl.kernels import all_kernels
from kernelpilot.errors import InputError
from kernelpilot.tile_tuner.kernel_api import EXIT_CANNOT_RUN, EXIT_WRONG_RESULT, parse_result_line
from tests.support import REPO

KERNELS = {k.kind: k for k in all_kernels()}
OUTPUTS = REPO / "tests" / "data" / "sycl" / "outputs"


def test_kernels_are_registered_through_the_plugin() -> None:
    from kernelpilot.plugins import get_registry

    sycl = {k.kind: k for k in get_registry().collect("kp_tile_kernels") if k.backend == "sycl"}
    assert sorted(sycl) == ["fa_decode", "fa_prefill", "gemm", "grouped_gemm", "moe_gemm"]
    assert all(k.targets == ("bmg", "pvc") and k.template_version for k in sycl.values())


def test_gemm_problem_and_alignment_errors() -> None:
    g = KERNELS["gemm"]
    assert g.validate_problem({"M": 100, "N": 64, "K": 32}, "bf16", "w") == {
        "M": 100, "N": 64, "K": 32, "layout": "rr", "dtype": "bf16", "out_dtype": "f32",
    }  # fmt: skip
    assert g.validate_problem({"M": 7, "N": 16, "K": 64}, "s8", "w")["out_dtype"] == "s32"
    with pytest.raises(
        InputError, match=r"f\.yaml: workload 'x'.*K=4001 is not a multiple of 8: row-major A \(bf16\)"
    ):
        g.validate_problem({"M": 64, "N": 64, "K": 4001}, "bf16", "f.yaml: workload 'x'")
    with pytest.raises(InputError, match="M=100 is not a multiple of 16: column-major A"):
        g.validate_problem({"M": 100, "N": 64, "K": 64, "layout": "cr"}, "s8", "w")
    with pytest.raises(InputError, match="unknown dims \\['L'\\]"):
        g.validate_problem({"M": 64, "N": 64, "K": 64, "L": 2}, "bf16", "w")
    with pytest.raises(InputError, match="missing dim K"):
        g.validate_problem({"M": 64, "N": 64}, "bf16", "w")
    with pytest.raises(InputError, match="layout 'tn' not in rr, rc, cr, cc"):
        g.validate_problem({"M": 64, "N": 64, "K": 64, "layout": "tn"}, "bf16", "w")
    with pytest.raises(InputError, match="integer GEMMs write s32"):
        g.validate_problem({"M": 64, "N": 64, "K": 64, "out_dtype": "bf16"}, "s8", "w")
    with pytest.raises(InputError, match="unknown dtype 'int3'"):
        g.validate_problem({"M": 64, "N": 64, "K": 64}, "int3", "w")


def test_grouped_problem_accepts_groups_of_different_sizes() -> None:
    g = KERNELS["grouped_gemm"]
    p = g.validate_problem({"shapes": [[128, 256, 512], [64, 1024, 256]]}, "bf16", "w")
    assert p["shapes"] == [[128, 256, 512], [64, 1024, 256]] and (p["M"], p["N"], p["K"]) == (128, 1024, 512)
    same = g.validate_problem({"M": 128, "N": 256, "K": 512, "groups": 3}, "bf16", "w")
    assert same["shapes"] == [[128, 256, 512]] * 3
    with pytest.raises(InputError, match=r"\(group 1\).*N=1001"):
        g.validate_problem({"shapes": [[128, 256, 512], [64, 1001, 256]]}, "bf16", "w")
    with pytest.raises(InputError, match="either shapes or M, N, K, groups"):
        g.validate_problem({"shapes": [[8, 16, 16]], "M": 8}, "bf16", "w")
    argv, env = g.run_command(Path("/b/program"), p, {"warmup": 5, "repetitions": 9})
    assert argv == [
        "/b/program",
        "--shapes=128x256x512,64x1024x256",
        "--l2_mib=64",
        "--warmup=5",
        "--repetitions=9",
    ]
    assert env["ONEAPI_DEVICE_SELECTOR"] and env["IGC_ExtraOCLOptions"] == "-cl-intel-256-GRF-per-thread"
    assert g.flops(p) == 2 * (128 * 256 * 512 + 64 * 1024 * 256)


def test_moe_problem_token_split_is_reproducible_and_skewed() -> None:
    m = KERNELS["moe_gemm"]
    p = m.validate_problem({"N": 2880, "K": 2880, "num_experts": 32, "total_tokens": 8192}, "bf16", "w")
    tokens = p["tokens_per_expert"]
    assert len(tokens) == 32 and sum(tokens) == 8192 and len(set(tokens)) > 8  # experts differ
    assert tokens == problems.tokens_split(8192, 32, 0)
    assert problems.tokens_split(8192, 32, 1) != tokens
    explicit = m.validate_problem({"N": 512, "K": 256, "tokens_per_expert": [3, 0, 300]}, "f16", "w")
    assert explicit["num_experts"] == 3 and explicit["total_tokens"] == 303
    argv, _ = m.run_command(Path("p"), explicit, {})
    assert argv == ["p", "--n=512", "--k=256", "--tokens=3,0,300", "--l2_mib=64"]
    assert m.flops(explicit) == 2 * 303 * 512 * 256
    with pytest.raises(InputError, match="MoE GEMM takes 16-bit float A and B"):
        m.validate_problem({"N": 512, "K": 256, "num_experts": 2, "total_tokens": 4}, "s8", "w")
    with pytest.raises(InputError, match="N=2900 is not a multiple of 32"):
        m.validate_problem({"N": 2900, "K": 256, "num_experts": 2, "total_tokens": 4}, "bf16", "w")
    with pytest.raises(InputError, match="total_tokens=5 disagrees with tokens_per_expert"):
        m.validate_problem({"N": 512, "K": 256, "tokens_per_expert": [1, 2], "total_tokens": 5}, "bf16", "w")


def test_attention_problem_names_and_rules() -> None:
    pre, dec = KERNELS["fa_prefill"], KERNELS["fa_decode"]
    dims = {"head_dim": 128, "batch": 2, "num_heads_q": 32, "num_heads_kv": 8, "seq_qo": 1024, "seq_kv": 4096}
    p = pre.validate_problem(dims, "bf16", "w")
    assert (p["head_dim_qk"], p["head_dim_vo"], p["causal"], p["fa_mode"]) == (128, 128, False, "prefill")
    argv, _ = pre.run_command(Path("p"), p, {"iterations": 50})
    assert argv == ["p", "--batch=2", "--num_heads_q=32", "--num_heads_kv=8", "--seq_qo=1024", "--seq_kv=4096",
                    "--head_dim_qk=128", "--head_dim_vo=128", "--l2_mib=64", "--iterations=50"]  # fmt: skip
    assert pre.flops(p) == 2.0 * 2 * 32 * 1024 * 4096 * 256
    causal = pre.validate_problem({**dims, "seq_kv": 1024, "causal": True}, "bf16", "w")
    assert pre.flops(causal) == pytest.approx(2.0 * 2 * 32 * 1024 * (1025 / 2) * 256)
    mla = pre.validate_problem(
        {**{k: v for k, v in dims.items() if k != "head_dim"}, "head_dim_qk": 192, "head_dim_vo": 128},
        "bf16",
        "w",
    )
    assert (mla["head_dim_qk"], mla["head_dim_vo"], mla["head_dim"]) == (192, 128, None)
    d = dec.validate_problem(
        {"head_dim": 64, "batch": 4, "num_heads_q": 8, "seq_kv": 8192, "persistent": True}, "e4m3", "w"
    )
    assert d["seq_qo"] == 1 and d["num_heads_kv"] == 8 and d["persistent"]
    with pytest.raises(InputError, match="num_heads_q=32 is not a multiple of num_heads_kv=6"):
        pre.validate_problem({**dims, "num_heads_kv": 6}, "bf16", "w")
    with pytest.raises(InputError, match="persistent=true with causal=true"):
        dec.validate_problem(
            {"head_dim": 64, "batch": 1, "num_heads_q": 8, "seq_kv": 512, "persistent": True, "causal": True},
            "bf16",
            "w",
        )
    with pytest.raises(InputError, match="persistent=true needs fa_mode decode"):
        pre.validate_problem({**dims, "persistent": True}, "bf16", "w")
    with pytest.raises(InputError, match="fa_mode='decode' but the kernel is fa_prefill"):
        pre.validate_problem({**dims, "fa_mode": "decode"}, "bf16", "w")
    with pytest.raises(InputError, match="missing dim seq_qo"):
        pre.validate_problem({k: v for k, v in dims.items() if k != "seq_qo"}, "bf16", "w")
    with pytest.raises(InputError, match="allowed: bf16, f16, e4m3, e5m2"):
        pre.validate_problem(dims, "tf32", "w")


def test_gemm_run_command_and_variants() -> None:
    g = KERNELS["gemm"]
    p = g.validate_problem({"M": 64, "N": 4096, "K": 16384}, "bf16", "w")
    argv, env = g.run_command(Path("/x/program"), p, {"mode": "splitk", "splits": 4, "l2_mib": 18})
    assert argv == [
        "/x/program",
        "--m=64",
        "--n=4096",
        "--k=16384",
        "--mode=splitk",
        "--splits=4",
        "--l2_mib=18",
    ]
    assert env["SYCL_PROGRAM_COMPILE_OPTIONS"] == "-ze-opt-large-register-file"
    # the tuner's generic timing knobs (--reps, --target-ms) reach the program under its names
    argv, _ = g.run_command(Path("p"), p, {"reps": 9, "target_ms": 25.4, "warmup": 3})
    assert argv[-3:] == ["--warmup=3", "--repetitions=9", "--target_ms=25"]
    cfg = {"wg": [64, 256, 32], "sg": [2, 8, 1], "stages": 2, "schedule": "splitk"}
    assert g.runtime_variants(cfg, p) == [{"mode": "splitk", "splits": s} for s in (2, 4, 8)]
    short = g.validate_problem({"M": 64, "N": 4096, "K": 96}, "bf16", "w")
    assert g.runtime_variants(cfg, short) == [{"mode": "splitk", "splits": 2}]


def test_user_device_selector_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONEAPI_DEVICE_SELECTOR", "level_zero:1")
    _, env = KERNELS["gemm"].run_command(Path("p"), {"M": 8, "N": 16, "K": 16}, {})
    assert env["ONEAPI_DEVICE_SELECTOR"] == "level_zero:1"


# ---- output parsing ------------------------------------------------------------------------------


def test_our_programs_json_lines_parse_with_the_shared_schema() -> None:
    ok = parse_result_line((OUTPUTS / "kp_gemm_ok.txt").read_text())
    assert ok.status == "ok" and ok.time_ms.median == 1.5 and ok.verification.passed
    assert [c["name"] for c in ok.verification.checked] == ["partial_tiles", "timed_shape"]
    wrong = output_parser.parse_any((OUTPUTS / "kp_fa_wrong.txt").read_text())
    assert wrong.status == "wrong_result" and wrong.time_ms is None and not wrong.verification.passed
    cannot = output_parser.parse_any((OUTPUTS / "kp_cannot_run.txt").read_text())
    assert cannot.status == "cannot_run" and "can_implement" in cannot.message
    assert (EXIT_CANNOT_RUN, EXIT_WRONG_RESULT) == (
        3,
        4,
    )  # the programs' kp::kExitCannotRun / kExitWrongResult


def test_library_gemm_example_formats() -> None:
    r = output_parser.parse_library_output((OUTPUTS / "ex00_gemm_passed.txt").read_text())
    assert (r.status, r.kernel, r.tflops, r.time_ms.median) == ("ok", "gemm", 101.234, 1.6973)
    assert r.problem == {"M": 5120, "N": 4096, "K": 4096, "L": 1} and r.verification.passed
    failed = output_parser.parse_library_output((OUTPUTS / "ex00_gemm_failed.txt").read_text())
    assert failed.status == "wrong_result" and not failed.verification.passed and failed.time_ms is None
    empty = output_parser.parse_library_output("Segmentation fault\n")
    assert empty.status == "cannot_run" and "no performance line" in empty.message
    skipped = output_parser.parse_library_output((OUTPUTS / "ex00_gemm_skipped.txt").read_text())
    assert skipped.status == "cannot_run" and skipped.verification is None  # skipped is never passed
    assert "did not verify" in skipped.message and skipped.tflops == 99.001


def test_library_grouped_moe_and_fa_formats() -> None:
    g = output_parser.parse_library_output((OUTPUTS / "ex04_grouped_passed.txt").read_text())
    assert (g.status, g.kernel, g.time_ms.median, g.tflops) == (
        "ok",
        "grouped_gemm",
        3.52,
        pytest.approx(97.6102),
    )
    moe = output_parser.parse_library_output(
        (OUTPUTS / "ex12_moe_unverified.txt").read_text(), kernel="moe_gemm"
    )
    assert moe.status == "cannot_run" and moe.gbps == 120.3 and moe.kernel == "moe_gemm"
    fa = output_parser.parse_library_output((OUTPUTS / "ex06_fa_passed.txt").read_text())
    assert (fa.status, fa.gbps, fa.tflops, fa.time_ms.median) == ("ok", 812.345, 45.678, 0.2403)
    assert fa.problem == {"batch": 32, "num_heads_q": 16, "num_heads_kv": 16, "seq_qo": 512, "seq_kv": 512,
                          "head_dim_qk": 128, "head_dim_vo": 128, "causal": True}  # fmt: skip


def test_library_google_benchmark_json() -> None:
    entries = output_parser.parse_gbench_json((OUTPUTS / "gbench_gemm.json").read_text())
    assert entries[0]["status"] == "ok" and entries[0]["tflops"] == 100.98
    assert entries[0]["time_ms"] == {"median": 1.701, "min": 1.68, "max": 1.79, "repetitions": 50}
    assert entries[1]["status"] == "wrong_result" and "time_ms" not in entries[1]


def test_min_bytes_for_the_roofline() -> None:
    g = KERNELS["gemm"].validate_problem({"M": 64, "N": 128, "K": 256}, "bf16", "w")
    assert KERNELS["gemm"].min_bytes(g) == 64 * 256 * 2 + 256 * 128 * 2 + 64 * 128 * 4  # f32 out
    i8 = KERNELS["gemm"].validate_problem({"M": 64, "N": 128, "K": 256}, {"a": "s8", "b": "s4"}, "w")
    assert KERNELS["gemm"].min_bytes(i8) == 64 * 256 + 256 * 128 / 2 + 64 * 128 * 4
    moe = KERNELS["moe_gemm"].validate_problem({"N": 64, "K": 32, "tokens_per_expert": [3, 5]}, "bf16", "w")
    assert KERNELS["moe_gemm"].min_bytes(moe) == (8 * 32 + 2 * 64 * 32 + 8 * 64) * 2
    fa = KERNELS["fa_decode"].validate_problem(
        {"head_dim": 64, "batch": 2, "num_heads_q": 8, "num_heads_kv": 2, "seq_kv": 100}, "bf16", "w"
    )
    assert KERNELS["fa_decode"].min_bytes(fa) == 2 * 8 * 1 * (64 * 2 + 64 * 4) + 2 * 2 * 100 * 128 * 2


def test_check_runtime_refuses_without_an_intel_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    if shutil.which("sycl-ls"):
        pytest.skip("sycl-ls exists here; this test is about machines without the oneAPI runtime")
    with pytest.raises(Exception, match="no Intel GPU to benchmark on: sycl-ls not found.*--dry-run"):
        KERNELS["gemm"].check_runtime()
