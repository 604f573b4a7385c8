"""Settings that act inside a run: SAVE_INTERMEDIATE, TARGET_SPEEDUP, KNOWLEDGE_BASE_ENABLED,
KNOWLEDGE_DIR, the device hints in the rules engine's autotune configs, and an LLM that cannot be
reached (a failed run, not exit 0)."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from kernelpilot.pipeline.contracts import StageContext
from kernelpilot.pipeline.runner import Pipeline, PipelineOptions
from kernelpilot.plugin_types import ResourceDir
from kernelpilot.settings import load_settings
from tests.pipeline.test_pipeline_loop import BASE, FakeSpec
from tests.support import REPO, run_cli
from tests.support.pipeline_doubles import ScriptedExecutor, ScriptedStage


def _pipeline(tmp_path: Path, impls, *, knowledge_dirs=None, **settings_kw) -> Pipeline:
    tmp_path.mkdir(parents=True, exist_ok=True)
    kernel = tmp_path / "kern.py"
    kernel.write_text(BASE + "# noisy=10,10.1,9.9\n")
    spec = tmp_path / "kern.yaml"
    spec.write_text("inputs: {}\n")
    settings = load_settings(
        cli={
            "trials_dir": str(tmp_path / "trials"),
            "log_dir": str(tmp_path / "logs"),
            "kernel_dir": str(tmp_path / "out"),
            **settings_kw,
        },
        env_file=None,
    )
    options = PipelineOptions(
        kernel_path=kernel,
        spec_path=spec,
        variant="ci",
        dsl="triton",
        device="cuda",
        engine="rules",
        output=tmp_path / "best.py",
        stages=[s.stage for s in impls],
    )
    return Pipeline(
        settings,
        options,
        spec=FakeSpec(),
        executor=ScriptedExecutor(),
        stage_impls={s.stage: s for s in impls},
        knowledge_dirs=knowledge_dirs or [],
    )


def test_save_intermediate_writes_every_evaluated_candidate(tmp_path: Path) -> None:
    stage = ScriptedStage("dtype_fix", [[BASE + "# wrong\n# time=1", BASE + "# time=5"]])
    result = _pipeline(tmp_path, [stage], save_intermediate=True).run()
    files = sorted(Path(p).name for p in result.record.intermediates)
    assert files == ["t1_dtype_fix_incorrect.py", "t2_dtype_fix_correct.py"]
    assert Path(result.record.intermediates[1]).read_text().endswith("# time=5")
    off = _pipeline(tmp_path / "off", [ScriptedStage("dtype_fix", [[BASE + "# time=5"]])]).run()
    assert off.record.intermediates == []


def test_target_speedup_stops_after_the_stage_that_reaches_it(tmp_path: Path) -> None:
    first = ScriptedStage("dtype_fix", [[BASE + "# time=4"]])  # 10 -> 4 ms: 2.5x
    second = ScriptedStage("autotuning", [[BASE + "# time=2"]])
    result = _pipeline(tmp_path, [first, second], target_speedup=2.0).run()
    assert [s.stage for s in result.record.stages] == ["dtype_fix"]
    assert result.record.skipped_stages["autotuning"] == "TARGET_SPEEDUP reached"
    assert result.record.target_reached["speedup"] == pytest.approx(2.5, rel=0.05)
    assert second.contexts == []
    # not reached: both stages run
    first2 = ScriptedStage("dtype_fix", [[BASE + "# time=4"]])
    second2 = ScriptedStage("autotuning", [[BASE + "# time=2"]])
    result = _pipeline(tmp_path / "b", [first2, second2], target_speedup=3.0).run()
    assert [s.stage for s in result.record.stages] == ["dtype_fix", "autotuning"]


def _kb(tmp_path: Path) -> list[ResourceDir]:
    root = tmp_path / "kb"
    (root / "common").mkdir(parents=True, exist_ok=True)
    (root / "common" / "rules.yaml").write_text(
        "constraints:\n  - name: no-fp64\n    description: never use float64\n    stages: [dtype_fix]\n"
        "patterns:\n  - name: tile-swizzle\n    description: swizzle pids\n    stages: [autotuning]\n"
    )
    return [ResourceDir(dsl="triton", path=root)]


def test_knowledge_base_switch_and_user_folder(tmp_path: Path) -> None:
    user = tmp_path / "mine"
    user.mkdir()
    (user / "house_rules.yaml").write_text(
        "constraints:\n  - name: house rule\n    description: keep BLOCK >= 64 on our parts\n"
    )
    on = ScriptedStage("dtype_fix", [[BASE + "# time=5"]])
    _pipeline(tmp_path / "on", [on], knowledge_dirs=_kb(tmp_path), knowledge_dir=str(user)).run()
    text = "\n".join(on.contexts[0].knowledge)
    assert "never use float64" in text and "keep BLOCK >= 64" in text
    assert "swizzle pids" not in text  # another stage's pattern

    off = ScriptedStage("dtype_fix", [[BASE + "# time=5"]])
    _pipeline(
        tmp_path / "off",
        [off],
        knowledge_dirs=_kb(tmp_path),
        knowledge_dir=str(user),
        knowledge_base_enabled=False,
    ).run()
    assert off.contexts[0].knowledge == []


def test_analysis_context_gets_every_constraint_but_no_pattern(tmp_path: Path) -> None:
    pipeline = _pipeline(tmp_path, [], knowledge_dirs=_kb(tmp_path))
    context = pipeline._context("", "src", [], [], 0, None, None)
    assert any("never use float64" in k for k in context.knowledge)
    assert not any("swizzle pids" in k for k in context.knowledge)


def test_missing_knowledge_dir_is_an_input_error(tmp_path: Path) -> None:
    from kernelpilot.errors import InputError

    stage = ScriptedStage("dtype_fix", [[BASE + "# time=5"]])
    with pytest.raises(InputError, match="KNOWLEDGE_DIR is not a folder"):
        _pipeline(tmp_path, [stage], knowledge_dir=str(tmp_path / "nope")).run()


GROUPED_GEMM = (REPO / "examples" / "gemm_bias_gelu" / "gemm_bias_gelu.py").read_text()


def _configs(source: str) -> list[tuple[dict, int, int]]:
    """(kwargs, num_warps, num_stages) of every triton.Config in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "triton.Config":
            kw = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
            out.append((ast.literal_eval(node.args[0]), kw["num_warps"], kw["num_stages"]))
    return out


@pytest.mark.parametrize("device", ["cuda", "xpu"])
def test_device_hints_become_an_autotune_config(tmp_path: Path, device: str) -> None:
    from kernelpilot.dsl_plugins.triton.stages import AutotuneRulesStage

    settings = load_settings(
        cli={
            "default_num_warps": 16,
            "default_num_stages": 6,
            "preferred_tile_m": 32,
            "preferred_tile_n": 64,
            "preferred_tile_k": 16,
        },
        env_file=None,
    )
    context = StageContext(
        stage="autotuning", dsl="triton", device=device, original_source=GROUPED_GEMM,
        current_source=GROUPED_GEMM, issues=[], spec=None, variant="ci", settings=settings,
    )  # fmt: skip
    (source,) = AutotuneRulesStage().propose(context)
    configs = _configs(source)
    assert ({"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 16}, 16, 6) in configs
    plain = load_settings(env_file=None)
    context.settings = plain
    (source,) = AutotuneRulesStage().propose(context)
    assert not any(c[1] == 16 and c[2] == 6 for c in _configs(source))


SWIZZLED = """import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr, GROUP_SIZE_M: tl.constexpr, grf_mode: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * GROUP_SIZE_M, mask=mask)


class Model(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        k[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256, GROUP_SIZE_M=1, grf_mode="default", num_warps=4)
        return y
"""


def test_group_size_m_and_grf_mode_settings_reach_the_configs() -> None:
    from kernelpilot.dsl_plugins.triton.rewrite.autotune import TuneHints, autotune_source

    settings = load_settings(cli={"group_size_m": 8, "grf_mode": "128"}, env_file=None)
    result = autotune_source(SWIZZLED, "xpu", hints=TuneHints.from_settings(settings))
    configs = _configs(result.source)
    assert configs[0][0] == {"BLOCK": 256, "GROUP_SIZE_M": 1, "grf_mode": "default"}  # the kernel's own
    assert all(c[0]["GROUP_SIZE_M"] == 8 and c[0]["grf_mode"] == "128" for c in configs[1:])
    assert len(configs) > 2
    # the launch no longer passes what the configs now set
    launch = result.source.split("return y")[0].splitlines()[-2]
    assert "GROUP_SIZE_M" not in launch and "grf_mode" not in launch


def test_unreachable_llm_endpoint_fails_the_run(tmp_path: Path) -> None:
    for name in ("softmax.py", "softmax_pytorch.py", "softmax.yaml"):
        shutil.copy(REPO / "examples" / "softmax" / name, tmp_path / name)
    done = run_cli(
        "optimize", "-i", "softmax.py", "-s", "softmax.yaml", "--variant", "ci", "--device", "cpu",
        "--engine", "llm", "--model", "openai/x", "--api-base", "http://127.0.0.1:9/v1", "--api-key", "k",
        "--noise-repeats", "1", "--stages", "dtype_fix",
        cwd=tmp_path, env={"LLM_CACHE_DIR": str(tmp_path / "cache")}, timeout=600,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the LLM cannot be used" in done.stderr and "--engine rules" in done.stderr


def test_empty_llm_model_exits_2(tmp_path: Path) -> None:
    done = run_cli("doctor", cwd=tmp_path, env={"LLM_MODEL": ""})
    assert done.returncode == 2 and "LLM_MODEL" in done.stderr


def test_tree_identity_message_names_a_real_flag(tmp_path: Path) -> None:
    from kernelpilot.errors import InputError
    from kernelpilot.trials.store import TreeIdentity, TrialStore

    def identity(sha: str) -> TreeIdentity:
        return TreeIdentity(sha, "s", "ci", "triton", "cpu", "k.py", "rtol=0.01,atol=1e-05")

    TrialStore.open(tmp_path, "k", identity("a")).close()
    with pytest.raises(InputError) as info:
        TrialStore.open(tmp_path, "k", identity("b"))
    assert "--trial-name" not in str(info.value) and "--name (-n)" in str(info.value)
    from kernelpilot.cli import build_parser

    help_text = build_parser()._subparsers._group_actions[0].choices["optimize"].format_help()
    assert "--name" in help_text and "--trial-name" not in help_text


@pytest.mark.slow
def test_docs_first_quick_start_on_a_cpu_machine_uses_a_small_variant(tmp_path: Path) -> None:
    """docs/pipeline.md's first command, run as written on a machine without a GPU."""
    for name in ("softmax.py", "softmax_pytorch.py", "softmax.yaml"):
        (tmp_path / "examples" / "softmax").mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "examples" / "softmax" / name, tmp_path / "examples" / "softmax" / name)
    docs = (REPO / "docs" / "pipeline.md").read_text()
    first = next(line for line in docs.splitlines() if line.startswith("kernelpilot optimize"))
    args = first.split()[1:]
    done = run_cli(*args, cwd=tmp_path, env={"OPENAI_API_BASE": "", "OPENAI_API_KEY": ""}, timeout=400)
    assert done.returncode == 0, done.stderr
    assert "using spec variant 'ci'" in done.stderr
