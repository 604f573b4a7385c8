"""The LLM engine end to end: scripted OpenAI-compatible server on 127.0.0.1 -> real litellm client ->
the pipeline's stage loop -> the REAL Triton executor (worker process, TRITON_INTERPRET=1 on CPU).

The loop must retry after malformed replies (showing the parse error), reject a wrong kernel with the
oracle, keep a correct one, survive an LLM timeout, and leave a consistent trial tree and run record."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from kernelpilot.engines.llm_stage import LLMStage
from kernelpilot.errors import KernelpilotError
from kernelpilot.llm.client import LLMClient
from kernelpilot.pipeline.runner import Pipeline, PipelineOptions
from kernelpilot.settings import load_settings
from kernelpilot.trials.store import TrialStore
from tests.support import REPO
from tests.support.fake_llm_server import FakeLLMServer
from tests.support.pipeline_doubles import ScriptedExecutor

# never pytest.importorskip("litellm"): importing it without LITELLM_LOCAL_MODEL_COST_MAP fetches a price
# list from the network; the client sets the variable and imports it lazily.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")
EXAMPLE = REPO / "examples" / "softmax"

ANALYSIS_TEMPLATE = """Analyze this {{ dsl }} kernel for {{ device }}:
{{ current_source }}
Static findings: {% for i in issues %}{{ i.category }}; {% endfor %}
"""
STAGE_TEMPLATE = """Stage {{ stage }}: {{ stage_description }}
{% for f in feedback %}REJECTED BEFORE: {{ f }}
{% endfor %}{% for k in knowledge %}KB: {{ k }}
{% endfor %}Current ({{ current_ms }} ms, baseline {{ baseline_ms }} ms):
{{ current_source }}
"""


@pytest.fixture
def server():
    srv = FakeLLMServer().start()
    yield srv
    srv.stop()


def _prompts(tmp_path: Path) -> Path:
    folder = tmp_path / "prompts"
    folder.mkdir()
    (folder / "analysis.md.j2").write_text(ANALYSIS_TEMPLATE)
    (folder / "optimize.md.j2").write_text(STAGE_TEMPLATE)
    kb = tmp_path / "kb" / "common"
    kb.mkdir(parents=True)
    (kb / "dtype_fix.md").write_text("Subtract the row max, then float32 is enough for softmax.")
    return folder


def _settings(tmp_path: Path, server: FakeLLMServer, **extra):
    return load_settings(
        cli={
            "engine": "llm",
            "llm_model": "openai/fake-model",
            "openai_api_base": server.base_url,
            "openai_api_key": "sk-never-in-records",
            "llm_timeout_s": extra.pop("timeout", 60.0),
            "llm_cache_dir": str(tmp_path / "llm_cache"),
            "trials_dir": str(tmp_path / "trials"),
            "log_dir": str(tmp_path / "logs"),
            **extra,
        },
        env_file=None,
    )


def _kb_dirs(tmp_path: Path):
    from kernelpilot.plugin_types import ResourceDir

    return [ResourceDir(dsl="triton", path=tmp_path / "kb")]


def _reply(code: str, why: str = "use float32") -> str:
    return json.dumps({"explanation": why, "code": code})


def test_llm_loop_with_real_triton_executor(tmp_path: Path, server: FakeLLMServer) -> None:
    from kernelpilot.dsl_plugins.triton.executor import TritonExecutor
    from kernelpilot.spec import load_spec

    kernel = tmp_path / "softmax.py"
    shutil.copy(EXAMPLE / "softmax.py", kernel)
    shutil.copy(EXAMPLE / "softmax_pytorch.py", tmp_path / "softmax_pytorch.py")
    original = kernel.read_text()
    good = original.replace(".to(tl.float64)", ".to(tl.float32)")
    wrong = good.replace("y = num / den", "y = num / (den + 1.0)")
    assert good != original and wrong != good
    server.script(
        json.dumps({"issues": [{"category": "slowness", "message": "?"}]}),  # unknown category -> retry
        json.dumps({"issues": [{"category": "float64_usage", "message": "fp64 softmax", "line": 18}]}),
        "Sure! Here is the faster kernel: ```python\nprint('no json')\n```",  # malformed -> retry
        _reply(wrong, "drop the fp64 and fold a constant"),  # parses, but wrong: the oracle rejects it
        _reply(good),  # attempt 1: correct
        json.dumps({"issues": []}),  # re-analysis after dtype_fix
    )
    settings = _settings(tmp_path, server)
    llm = LLMClient(settings, backoff_s=0.01)
    options = PipelineOptions(
        kernel_path=kernel,
        spec_path=EXAMPLE / "softmax.yaml",
        variant="ci",
        dsl="triton",
        device="cpu",
        engine="llm",
        output=tmp_path / "out.py",
        stages=["dtype_fix"],
        correctness_only_stages={"dtype_fix"},  # interpreter timings cannot show speed
        noise_repeats=1,
    )
    executor = TritonExecutor(dsl="triton", device="cpu", settings=settings)
    result = Pipeline(
        settings,
        options,
        spec=load_spec(EXAMPLE / "softmax.yaml"),
        executor=executor,
        stage_impls={"dtype_fix": LLMStage("triton", "dtype_fix")},
        prompt_dirs=[_prompts(tmp_path)],
        knowledge_dirs=_kb_dirs(tmp_path),
        llm=llm,
    ).run()

    assert len(server.requests) == 6 and not server.replies
    # the analysis parse error (unknown category) was shown to the model
    assert "unknown category 'slowness'" in server.requests[1]["messages"][-1]["content"]
    # the malformed optimize reply was answered with the parse error
    assert "could not be used" in server.requests[3]["messages"][-1]["content"]
    # attempt 1 saw why attempt 0 was rejected, and the KB snippet for the stage
    attempt1 = server.requests[4]["messages"][-1]["content"]
    assert "REJECTED BEFORE: candidate t1 rejected: incorrect" in attempt1
    assert "KB: Subtract the row max" in attempt1

    rec = result.record
    assert [i["source"] for i in rec.issues].count("llm") == 1
    stage = rec.stages[0]
    assert stage.status == "improved" and stage.attempts == 2 and stage.accepted == "t2"
    assert stage.verdicts == {"incorrect": 1, "correct": 1}
    assert (tmp_path / "out.py").read_text() == good
    store = TrialStore.open_existing(Path(rec.trial_tree))
    assert [(n.id, n.parent, n.stage, n.verdict, n.accepted) for n in store.nodes()] == [
        ("t0", None, "baseline", "correct", False),
        ("t1", "t0", "dtype_fix", "incorrect", False),
        ("t2", "t0", "dtype_fix", "correct", True),
        ("t3", "t2", "final", "correct", False),
    ]
    assert (
        store.code("t1") == wrong and "mismatch" in store.get("t1").message.lower() or store.get("t1").message
    )
    usage = rec.llm_usage
    assert usage["calls"] == 6 and usage["parse_failures"] == 2 and usage["total_tokens"] > 0
    saved = Path(result.record_path).read_text()
    assert "sk-never-in-records" not in saved and '"openai_api_key": "***"' in saved


def test_llm_timeout_is_an_attempt_failure_not_a_crash(tmp_path: Path, server: FakeLLMServer) -> None:
    kernel = tmp_path / "k.py"
    kernel.write_text("import triton\n# time=10\n")
    spec = tmp_path / "k.yaml"
    spec.write_text("x: 1\n")
    server.script(
        json.dumps({"issues": []}),  # analysis
        {"delay": 2.0, "content": "late"},
        {"delay": 2.0, "content": "late"},
        _reply("import triton\n# time=5\n"),
    )
    settings = _settings(tmp_path, server, timeout=0.5)
    llm = LLMClient(settings, backoff_s=0.01, max_retries=1)
    options = PipelineOptions(
        kernel_path=kernel,
        spec_path=spec,
        variant="ci",
        dsl="triton",
        device="cuda",
        engine="llm",
        output=tmp_path / "out.py",
        stages=["fusion"],
    )
    result = Pipeline(
        settings,
        options,
        spec=None,
        executor=ScriptedExecutor(),
        stage_impls={"fusion": LLMStage("triton", "fusion")},
        prompt_dirs=[_prompts(tmp_path)],
        llm=llm,
    ).run()
    stage = result.record.stages[0]
    assert "timed out after 2 attempt" in stage.notes[0]
    assert stage.status == "improved" and stage.attempts == 2
    assert result.record.llm_usage["failed_calls"] == 4  # 2 timeouts + 2 server errors (re-analysis)
    # the re-analysis ran out of script (500s) -> degraded to static analysis with a warning
    assert any("LLM analysis failed" in w for w in result.record.warnings)


def test_unreachable_endpoint_fails_the_run_at_the_first_call(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kernel = tmp_path / "k.py"
    kernel.write_text("import triton\n# time=10\n")
    spec = tmp_path / "k.yaml"
    spec.write_text("x: 1\n")
    settings = load_settings(
        cli={
            "llm_model": "openai/fake-model",
            "openai_api_base": f"http://127.0.0.1:{port}/v1",
            "openai_api_key": "sk-x",
            "llm_cache_dir": str(tmp_path / "cache"),
            "trials_dir": str(tmp_path / "trials"),
            "log_dir": str(tmp_path / "logs"),
        },
        env_file=None,
    )
    llm = LLMClient(settings, backoff_s=0.01, max_retries=1)
    options = PipelineOptions(
        kernel_path=kernel, spec_path=spec, variant="ci", dsl="triton", device="cuda", engine="llm",
        output=tmp_path / "out.py", stages=["fusion"],
    )  # fmt: skip
    pipeline = Pipeline(
        settings,
        options,
        spec=None,
        executor=ScriptedExecutor(),
        stage_impls={"fusion": LLMStage("triton", "fusion")},
        prompt_dirs=[_prompts(tmp_path)],
        llm=llm,
    )
    with pytest.raises(KernelpilotError, match="the LLM cannot be used.*Connection error"):
        pipeline.run()
    assert pipeline.record.status == "failed" and not pipeline.record.stages
    assert not (tmp_path / "out.py").exists()  # no output pretends the run worked
