"""The correctness check cannot be fooled by the candidate it checks.

Three hostile candidates (tests/support/hostile.py) each fool the check that runs inside the worker
process: one memoises its output by shape, one writes the worker's result file itself, one replaces
the worker's compare function.  The job executor judges from the candidate's saved outputs on the
checked inputs and on final inputs it has never seen, compared in the parent with the oracle's
outputs from a worker that loads no candidate code; all three are rejected, the honest kernel is
still accepted, and the worker's environment holds no API keys."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest

from tests.support import REPO, run_cli
from tests.support.fake_llm_server import FakeLLMServer
from tests.support.hostile import HOSTILE, SOFTMAX

pytest.importorskip("torch")
pytest.importorskip("triton")

EXAMPLE = REPO / "examples" / "softmax"


@pytest.fixture(scope="module")
def executor(tmp_path_factory):
    from kernelpilot.dsl_plugins.triton.executor import TritonExecutor
    from kernelpilot.spec import load_spec

    tmp = tmp_path_factory.mktemp("softmax")
    for name in ("softmax.py", "softmax_pytorch.py", "softmax.yaml"):
        shutil.copy(EXAMPLE / name, tmp / name)
    ex = TritonExecutor("triton", "cpu", None, timeout_s=300)
    ex.prepare(tmp / "softmax.py", load_spec(tmp / "softmax.yaml"), "ci")
    yield ex
    ex.close()


def test_the_honest_kernel_is_verified_by_the_parent(executor):
    ev = executor.evaluate(SOFTMAX, seed=11)
    assert ev.verdict == "correct", ev.message
    assert ev.extra.get("verified_by", "").startswith("parent")


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_candidate_is_rejected(name, executor):
    ev = executor.evaluate(HOSTILE[name], seed=12)
    assert ev.verdict != "correct", (name, ev.message)
    if name == "forged_result":
        assert "saved no outputs" in ev.message
    else:
        assert "checked by kernelpilot" in ev.message, ev.message


def test_the_worker_gets_no_secrets(executor, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak-123456")
    leak = SOFTMAX + '\nimport os\nassert "OPENAI_API_KEY" not in os.environ, "key leaked"\n'
    ev = executor.evaluate(leak, seed=13, time_it=False)
    assert ev.verdict == "correct", ev.message


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_optimize_engine_llm_rejects_a_hostile_candidate_end_to_end(name, tmp_path):
    for f in ("softmax.py", "softmax_pytorch.py", "softmax.yaml"):
        shutil.copy(EXAMPLE / f, tmp_path / f)
    original = (tmp_path / "softmax.py").read_text()
    server = FakeLLMServer().start()
    try:
        server.script(
            json.dumps({"issues": [{"category": "float64_usage", "message": "fp64 math", "line": 18}]}),
            json.dumps({"explanation": "faster", "code": HOSTILE[name]}),
            *[json.dumps({"issues": []})] * 3,
        )
        done = run_cli(
            "optimize", "-i", "softmax.py", "-s", "softmax.yaml", "--variant", "ci", "--device", "cpu",
            "--engine", "llm", "--model", "openai/fake-model", "--api-base", server.base_url,
            "--api-key", "sk-test-key-123456", "--stages", "dtype_fix", "--max-iterations", "1",
            "--noise-repeats", "1", "-o", "out.py", "--json",
            cwd=tmp_path, env={"LLM_CACHE_DIR": str(tmp_path / "cache")}, timeout=900,
        )  # fmt: skip
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr + done.stdout
    summary = json.loads(done.stdout)
    assert [s["accepted"] for s in summary["stages"]] == [None], summary["stages"]
    assert not summary["improved"]
    assert (tmp_path / "out.py").read_text() == original
    # it was run and rejected by the parent's own check (not dropped for some other reason)
    record = (tmp_path / summary["record"]).read_text()
    assert "checked by kernelpilot" in record or "saved no outputs" in record, record[-3000:]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["honest", *sorted(HOSTILE)])
def test_the_parent_check_on_a_cuda_gpu(name, tmp_path):
    """The same protocol with compiled Triton kernels and CUDA tensors (outputs moved to the CPU)."""
    from kernelpilot.dsl_plugins.triton.executor import TritonExecutor
    from kernelpilot.spec import load_spec

    for f in ("softmax.py", "softmax_pytorch.py", "softmax.yaml"):
        shutil.copy(EXAMPLE / f, tmp_path / f)
    ex = TritonExecutor("triton", "cuda", None, timeout_s=300)
    try:
        ex.prepare(tmp_path / "softmax.py", load_spec(tmp_path / "softmax.yaml"), "ci")
        ev = ex.evaluate(SOFTMAX if name == "honest" else HOSTILE[name], seed=21)
    finally:
        ex.close()
    if name == "honest":
        assert ev.verdict == "correct" and ev.timing is not None and not ev.timing.interpreter, ev.message
    else:
        assert ev.verdict != "correct", ev.message
