"""Triton executor under TRITON_INTERPRET=1: isolation (timeouts, crashes), oracle, poisoning, tolerances."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kernelpilot.dsl_plugins.triton.executor import TritonExecutor
from kernelpilot.execution import classify_bound, reference_path
from kernelpilot.settings import load_settings
from kernelpilot.spec import parse_spec

pytest.importorskip("triton")
pytest.importorskip("torch")

KERNEL = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * FACTOR, mask=mask)


class Model(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        PREAMBLE
        scale_kernel[(triton.cdiv(GRID_N, 64),)](x, y, n, BLOCK=64)
        return y
"""

REFERENCE = """
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0
"""

SPEC = {
    "inputs": {"X": {"shape": ["N"], "dtype": "float32"}},
    "inits": [],
    "ci": [{"params": ["X"], "dims": {"N": 300}, "flop": "N", "rtol": 0.001}],
}


def kernel(factor: str = "2.0", grid_n: str = "n", preamble: str = "pass") -> str:
    return KERNEL.replace("FACTOR", factor).replace("GRID_N", grid_n).replace("PREAMBLE", preamble)


@pytest.fixture
def executor(tmp_path: Path):
    (tmp_path / "scale.py").write_text(kernel())
    (tmp_path / "scale_pytorch.py").write_text(REFERENCE)
    ex = TritonExecutor("triton", "cpu", None, timeout_s=60)
    ex.prepare(tmp_path / "scale.py", parse_spec(SPEC, path="scale.yaml"), "ci")
    yield ex
    ex.close()


def test_correct_kernel_passes_and_is_marked_interpreter(executor):
    ev = executor.evaluate(kernel(), seed=1)
    assert ev.verdict == "correct", ev.message
    assert ev.timing is not None and ev.timing.interpreter
    assert executor.oracle_kind.startswith("pytorch reference")
    assert ev.extra["rtol"] == 0.001  # spec value (no settings given)


def test_wrong_result_is_detected(executor):
    ev = executor.evaluate(kernel(factor="2.01"), seed=2)
    assert ev.verdict == "incorrect"
    assert "outside rtol" in ev.message and ev.max_abs_error > 0


def test_unwritten_output_elements_are_caught_by_poisoning(executor):
    # the grid covers only the first 256 of 300 elements: the tail of y is never written
    ev = executor.evaluate(kernel(grid_n="n - 44"), seed=3)
    assert ev.verdict == "incorrect"
    assert "never written" in ev.message and "44 of 300" in ev.message


def test_hang_is_killed_by_the_timeout(tmp_path):
    (tmp_path / "scale.py").write_text(kernel())
    ex = TritonExecutor("triton", "cpu", None, timeout_s=8)
    ex.prepare(tmp_path / "scale.py", parse_spec(SPEC), "ci")
    t0 = time.time()
    ev = ex.evaluate(kernel(preamble="import time; time.sleep(600)"), seed=0)
    assert ev.verdict == "timeout"
    assert time.time() - t0 < 30


def test_crash_without_result_is_reported_not_raised(executor):
    ev = executor.evaluate(kernel(preamble="import os; os._exit(7)"), seed=0)
    assert ev.verdict == "runtime_error"
    assert "exit code 7" in ev.message
    ev = executor.evaluate(kernel(preamble="import ctypes; ctypes.string_at(0)"), seed=0)  # segfault
    assert ev.verdict == "runtime_error" and "crashed" in ev.message


def test_syntax_and_exceptions(executor):
    assert executor.evaluate("def broken(:\n", seed=0).verdict == "compile_error"
    ev = executor.evaluate(kernel(preamble="raise ValueError('boom')"), seed=0)
    assert ev.verdict == "runtime_error" and "boom" in ev.message
    ev = executor.evaluate(kernel().replace("class Model", "class NotModel"), seed=0)
    assert ev.verdict == "invalid" and "class Model" in ev.message


def test_original_kernel_is_the_oracle_without_reference(tmp_path):
    (tmp_path / "scale.py").write_text(kernel(factor="3.0"))
    assert reference_path(tmp_path / "scale.py") is None
    ex = TritonExecutor("triton", "cpu", None, timeout_s=60)
    ex.prepare(tmp_path / "scale.py", parse_spec(SPEC), "ci")
    assert ex.oracle_kind.startswith("original kernel")
    assert ex.evaluate(kernel(factor="3.0"), seed=5).correct
    assert ex.evaluate(kernel(factor="2.0"), seed=5).verdict == "incorrect"


def test_tolerances_from_settings_win_over_spec(tmp_path):
    (tmp_path / "scale.py").write_text(kernel())
    (tmp_path / "scale_pytorch.py").write_text(REFERENCE)
    spec = parse_spec(SPEC)
    settings = load_settings(
        cli={"correctness_rtol": 0.05}, spec=spec.tolerance_settings("ci"), env_file=None
    )
    ex = TritonExecutor("triton", "cpu", settings, timeout_s=60)
    ex.prepare(tmp_path / "scale.py", spec, "ci")
    assert ex.rtol == 0.05
    # 2.01 vs 2.0 is 0.5 % off: rejected at the spec's 0.1 %, accepted at the CLI's 5 %
    assert ex.evaluate(kernel(factor="2.01"), seed=4).correct
    ex_default = TritonExecutor("triton", "cpu", None)
    ex_default.prepare(tmp_path / "scale.py", parse_spec({**SPEC, "ci": [{"dims": {"N": 8}}]}), "ci")
    assert (ex_default.rtol, ex_default.atol) == (1e-2, 1e-5)


def test_environment_between_spec_and_defaults(tmp_path, monkeypatch):
    (tmp_path / "scale.py").write_text(kernel())
    monkeypatch.chdir(tmp_path)  # no .env here
    monkeypatch.setenv("CORRECTNESS_RTOL", "0.2")
    monkeypatch.setenv("CORRECTNESS_ATOL", "0.3")
    ex = TritonExecutor("triton", "cpu", None)
    ex.prepare(tmp_path / "scale.py", parse_spec(SPEC), "ci")  # spec sets rtol only
    assert (ex.rtol, ex.atol) == (0.001, 0.3)


def test_side_by_side_checks_each_candidate(executor):
    good, bad = executor.evaluate_side_by_side([kernel(), kernel(factor="1.0")], seed=9, rounds=1)
    assert good.correct and good.timing is not None
    assert bad.verdict == "incorrect" and bad.timing is None


def test_inputs_are_seeded_and_fresh():
    import torch

    from kernelpilot.worker_kit.model import make_inputs

    variant = {
        "inputs": [
            {"name": "A", "shape": [64], "dtype": "float16"},
            {"name": "ids", "shape": [1000], "dtype": "int32", "range": [3, 9]},
        ]
    }
    a1, ids = make_inputs(torch, variant, 1, "cpu")
    a2, _ = make_inputs(torch, variant, 1, "cpu")
    a3, _ = make_inputs(torch, variant, 2, "cpu")
    assert torch.equal(a1, a2) and not torch.equal(a1, a3)
    assert a1.dtype == torch.float16 and ids.dtype == torch.int32
    assert int(ids.min()) >= 3 and int(ids.max()) <= 8 and len(set(ids.tolist())) == 6


def test_validate_rules():
    ex = TritonExecutor("triton", "cpu", None)
    assert ex.validate(kernel()) == []
    problems = ex.validate(kernel().replace("BLOCK=64", "BLOCK=48"))
    assert any("BLOCK=48 is not a power of two" in p for p in problems)
    assert any(
        "no @triton.jit" in p for p in ex.validate("class Model:\n    def forward(self):\n        pass\n")
    )
    assert any("class Model" in p for p in ex.validate(kernel().replace("class Model", "class M")))
    assert ex.validate("x = (")[0].startswith("syntax error")
    torch_only = kernel().replace("scale_kernel[(triton.cdiv(n, 64),)](x, y, n, BLOCK=64)", "y = x * 2.0")
    assert any("is used" in p for p in ex.validate(torch_only))
    from kernelpilot.dsl_plugins.triton.executor import claims_file

    assert claims_file(Path("k.py"), kernel())
    assert not claims_file(Path("k.py"), "from triton.experimental import gluon\n@gluon.jit\ndef k(): pass\n")


def test_invalid_sources_are_not_run(executor):
    # a "kernel" that computes the answer with PyTorch alone would match the oracle; it is rejected
    torch_only = kernel().replace("scale_kernel[(triton.cdiv(n, 64),)](x, y, n, BLOCK=64)", "y = x * 2.0")
    ev = executor.evaluate(torch_only, seed=0)
    assert ev.verdict == "invalid" and "is used" in ev.message


def test_roofline_classification_from_catalogue():
    pytest.importorskip("kernelpilot.hw_models.catalogue")
    low = classify_bound(1.0, "NVIDIA H200", "float16")
    high = classify_bound(1000.0, "NVIDIA H200", "float16")
    assert low["bound"] == "memory" and high["bound"] == "compute"
    assert 100 < low["ridge_flop_per_byte"] < 400
    assert classify_bound(1.0, "Some Unknown GPU", "float16")["bound"] == "unknown"


def test_get_example_inputs_when_spec_lists_none(tmp_path):
    from kernelpilot.errors import InputError

    with_fn = kernel() + "\n\ndef get_example_inputs():\n    return [torch.randn(257)]\n"
    (tmp_path / "scale.py").write_text(with_fn)
    (tmp_path / "scale_pytorch.py").write_text(REFERENCE)
    spec = parse_spec({"ci": [{"dims": {}, "flop": 257}]}, path="noinputs.yaml")
    ex = TritonExecutor("triton", "cpu", None, timeout_s=60)
    ex.prepare(tmp_path / "scale.py", spec, "ci")
    assert ex.evaluate(with_fn, seed=3).correct
    # a candidate cannot pick its own data: inputs come from the original file, so a wrong kernel fails
    assert (
        ex.evaluate(
            kernel(factor="2.5") + "\ndef get_example_inputs():\n    return [torch.zeros(257)]\n", seed=3
        ).verdict
        == "incorrect"
    )
    (tmp_path / "plain.py").write_text(kernel())
    with pytest.raises(InputError, match="get_example_inputs"):
        TritonExecutor("triton", "cpu", None).prepare(tmp_path / "plain.py", spec, "ci")
