"""CUDA source kernels: nvcc command lines, syntax-only validate, compile errors as feedback, the
executor's input checks and DSL detection.  nvcc runs for real (no GPU needed to compile); running a
kernel needs a GPU (``@pytest.mark.gpu``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelpilot.dsl_plugins.cuda.source_build import (
    BuildOptions,
    arch_flags,
    arch_for_capability,
    build_command,
    compile_library,
    syntax_command,
)
from kernelpilot.dsl_plugins.cuda.source_executor import CudaSourceExecutor
from kernelpilot.errors import InputError
from kernelpilot.spec import load_spec
from tests.support import REPO

GEMM = REPO / "examples" / "cuda_gemm_bias_relu"
RMS = REPO / "examples" / "cuda_row_rms"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


def executor(device: str = "cpu", example: Path = RMS, variant: str = "ci") -> CudaSourceExecutor:
    ex = CudaSourceExecutor(device=device)
    ex.prepare(example / f"{example.name}.cu", load_spec(example / f"{example.name}.yaml"), variant)
    return ex


def test_command_lines_target_hopper_and_build_a_shared_library(tmp_path: Path) -> None:
    options = BuildOptions(arch="sm_90a", nvcc="nvcc", defines={"BM": "64"})
    cmd = build_command(tmp_path / "k.cu", tmp_path / "k.so", options)
    assert "-gencode=arch=compute_90a,code=sm_90a" in cmd
    assert {"-shared", "-O3", "-std=c++17", "-DBM=64"} <= set(cmd)
    assert cmd[cmd.index("-Xcompiler") + 1] == "-fPIC"
    include = Path(cmd[cmd.index("-I") + 1])
    assert (include / "kernelpilot_cuda.hpp").is_file()  # the contract header ships with the package
    syntax = syntax_command(tmp_path / "k.cu", options)
    assert "-fdevice-syntax-only" in syntax and syntax[syntax.index("-Xcompiler") + 1] == "-fsyntax-only"
    assert "-shared" not in syntax


def test_arch_names() -> None:
    assert arch_for_capability(9, 0) == "sm_90a"  # H100/H200: wgmma/TMA need the 'a' target
    assert arch_for_capability(8, 0) == "sm_80"
    assert arch_flags("sm_100a") == ["-gencode=arch=compute_100a,code=sm_100a"]
    with pytest.raises(ValueError, match="sm_90a"):
        arch_flags("hopper")


def test_prepare_needs_cu_file_and_pytorch_reference(tmp_path: Path) -> None:
    spec = load_spec(RMS / "cuda_row_rms.yaml")
    lone = tmp_path / "lone.cu"
    lone.write_text((RMS / "cuda_row_rms.cu").read_text())
    ex = CudaSourceExecutor(device="cpu")
    with pytest.raises(InputError, match="lone_pytorch.py") as err:
        ex.prepare(lone, spec, "ci")
    assert "lone.cu" in str(err.value)
    py = tmp_path / "k.py"
    py.write_text("x = 1\n")
    with pytest.raises(InputError, match=r"\.cu"):
        ex.prepare(py, spec, "ci")
    with pytest.raises(InputError, match="device"):
        CudaSourceExecutor(device="xpu")
    ex.close()


def test_claims_only_cu_files_with_the_entry_point() -> None:
    from kernelpilot.dsl_plugins.cuda.source_executor import claims_file

    source = (RMS / "cuda_row_rms.cu").read_text()
    assert claims_file(RMS / "cuda_row_rms.cu", source)
    assert not claims_file(Path("k.py"), source)
    assert not claims_file(Path("k.cu"), "__global__ void k() {}")


@needs_nvcc
def test_validate_is_the_compiler_not_a_python_parser() -> None:
    ex = executor()
    good = (RMS / "cuda_row_rms.cu").read_text()
    assert ex.validate(good) == []  # valid C++, certainly not valid Python
    bad = good.replace("acc += Vec<VEC>::sumsq(xv[i]);", "acc += Vec<VEC>::sumsq(xv[i])")
    problems = ex.validate(bad)
    assert len(problems) == 1 and "nvcc syntax check failed" in problems[0]
    assert "kernel.cu(" in problems[0] and 'expected a ";"' in problems[0]  # nvcc's own message
    assert "k_" not in problems[0].split("\n", 1)[1][:40]  # temp file names are replaced
    assert any("kp_forward" in p for p in ex.validate(good.replace("kp_forward", "kp_fwd")))
    ex.close()


@needs_nvcc
def test_compile_error_becomes_feedback_for_the_stage_loop() -> None:
    ex = executor()
    bad = (RMS / "cuda_row_rms.cu").read_text().replace("sqrtf(acc / C)", "sqrtf(acc / undefined_cols)")
    ev = ex.evaluate(bad, seed=1)
    assert ev.verdict == "compile_error"
    assert "undefined_cols" in ev.message and "is undefined" in ev.message
    ex.close()


@needs_nvcc
def test_good_kernel_compiles_on_cpu_but_is_not_run_there() -> None:
    ex = executor(example=GEMM)
    ev = ex.evaluate((GEMM / "cuda_gemm_bias_relu.cu").read_text(), seed=1)
    assert ev.verdict == "runtime_error"
    assert "compiled with nvcc" in ev.message and "'cuda'" in ev.message
    ex.close()


@needs_nvcc
def test_builds_are_cached_by_source_and_flags(tmp_path: Path) -> None:
    source = (RMS / "cuda_row_rms.cu").read_text()
    options = BuildOptions(arch="sm_90a")
    first = compile_library(source, tmp_path, options)
    assert first.ok and first.output is not None and first.output.stat().st_size > 0
    assert "registers" in first.log.lower() or "Used" in first.log  # -Xptxas -v resource report
    again = compile_library(source, tmp_path, options)
    assert again.cached and again.output == first.output
    other = compile_library(source, tmp_path, BuildOptions(arch="sm_90a", defines={"VEC": "4"}))
    assert other.ok and other.output != first.output


def test_dsl_detection_picks_cuda_for_a_cu_file() -> None:
    from kernelpilot.pipeline.setup import detect_dsl
    from kernelpilot.plugins import get_registry

    dsl, ex = detect_dsl(get_registry(), RMS / "cuda_row_rms.cu", None, "cpu", None)
    assert dsl == "cuda" and isinstance(ex, CudaSourceExecutor)
    ex.close()


# ----------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_examples_are_correct_and_timed_on_the_gpu() -> None:
    for example in (GEMM, RMS):
        ex = executor("cuda", example)
        ev = ex.evaluate((example / f"{example.name}.cu").read_text(), seed=3)
        assert ev.verdict == "correct", ev.message
        assert ev.timing is not None and ev.timing.median_ms > 0 and not ev.timing.interpreter
        ex.close()


@pytest.mark.gpu
def test_unwritten_outputs_are_caught_on_the_gpu() -> None:
    ex = executor("cuda")
    lazy = (
        (RMS / "cuda_row_rms.cu")
        .read_text()
        .replace("if (row < R && lane == 0)", "if (row < R / 2 && lane == 0)")
    )
    ev = ex.evaluate(lazy, seed=3)
    assert ev.verdict == "incorrect" and "never written" in ev.message
    ex.close()


@pytest.mark.gpu
@pytest.mark.slow
def test_rules_pipeline_end_to_end_on_the_gpu(tmp_path: Path, cli) -> None:
    """``kernelpilot optimize --dsl cuda --engine rules`` on the reduction (ci sizes): analysis plans
    memory_access + autotuning, every candidate is compiled and checked, the output passes a fresh check."""
    import json

    out = tmp_path / "rms_opt.cu"
    record = tmp_path / "run.json"
    result = cli(
        "optimize",
        "-i",
        str(RMS / "cuda_row_rms.cu"),
        "-s",
        str(RMS / "cuda_row_rms.yaml"),
        "-o",
        str(out),
        "--variant",
        "ci",
        "--engine",
        "rules",
        "--device",
        "cuda",
        "--max-iterations",
        "1",
        "--max-trials",
        "30",
        "--trials-dir",
        str(tmp_path / "trials"),
        "--record",
        str(record),
        "--json",
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    run = json.loads(record.read_text())
    assert run["dsl"] == "cuda" and [p["stage"] for p in run["plan"]] == ["memory_access", "autotuning"]
    assert run["final"][0]["verdict"] == "correct" and out.is_file()
    tuned = [s for s in run["stages"] if s["stage"] == "autotuning"][0]
    assert sum(tuned["verdicts"].values()) >= 2  # a batch of configurations was compiled and checked
