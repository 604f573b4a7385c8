"""Pipeline logic with a scripted executor: acceptance vs the stage input, noise, feedback, final
fresh check, best-k, resume without re-measuring, budgets and the trial tree's consistency."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelpilot.errors import InputError, KernelpilotError
from kernelpilot.pipeline.runner import Pipeline, PipelineOptions
from kernelpilot.settings import load_settings
from kernelpilot.trials.store import TrialStore
from tests.support.pipeline_doubles import ScriptedExecutor, ScriptedStage

# The base kernel: float64 use (-> dtype_fix) and no autotune (-> autotuning), found by static analysis.
BASE = """import triton
import triton.language as tl

@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr).to(tl.float64)

class Model:
    def forward(self, x):
        k[(1,)](x, BLOCK=128)
        return x
"""


class FakeSpec:
    def variant(self, name):
        raise KeyError(name)


def _setup(tmp_path: Path, base_directive: str = "# noisy=10,10.2,9.9", **settings_kw):
    tmp_path.mkdir(parents=True, exist_ok=True)
    kernel = tmp_path / "kern.py"
    kernel.write_text(BASE + base_directive + "\n")
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
    return kernel, spec, settings


def _run(tmp_path, impls_list, *, executor=None, settings_kw=None, base="# noisy=10,10.2,9.9", **opts):
    kernel, spec, settings = _setup(tmp_path, base, **(settings_kw or {}))
    executor = executor or ScriptedExecutor()
    options = PipelineOptions(
        kernel_path=kernel,
        spec_path=spec,
        variant="ci",
        dsl="triton",
        device="cuda",
        engine="rules",
        output=tmp_path / "best.py",
        **opts,
    )
    impls = {s.stage: s for s in impls_list}
    pipeline = Pipeline(settings, options, spec=FakeSpec(), executor=executor, stage_impls=impls)
    return pipeline.run(), executor


def test_keeps_only_correct_candidates_faster_than_the_stage_input(tmp_path: Path) -> None:
    dtype = ScriptedStage(
        "dtype_fix",
        [
            [BASE + "# wrong\n# time=1", BASE + "# time=9.8"],  # wrong; within noise of 10 ms
            [BASE + "# time=8"],  # correct and clearly faster -> accepted
        ],
    )
    # 9 ms beats the ORIGINAL (10) but not this stage's input (8): must be rejected (Xe-Forge accepted it)
    tune = ScriptedStage("autotuning", [[BASE + "# time=9"], [BASE + "# crash"]])
    result, executor = _run(tmp_path, [dtype, tune])
    rec = result.record
    assert rec.noise == pytest.approx(0.3 / 10.0)
    by_stage = {s.stage: s for s in rec.stages}
    assert by_stage["dtype_fix"].status == "improved" and by_stage["dtype_fix"].attempts == 2
    assert by_stage["autotuning"].status == "no_improvement" and by_stage["autotuning"].accepted is None
    # the feedback of attempt 1 told the stage why attempt 0 failed
    feedback = dtype.contexts[1].feedback
    assert any("incorrect" in f and "max abs error" in f for f in feedback)
    assert any("not faster than the stage input" in f for f in feedback)
    # the autotuning stage saw the dtype_fix output as its input
    assert tune.contexts[0].current_source.endswith("# time=8")
    assert tune.contexts[0].stage_input.timing.median_ms == 8
    assert (tmp_path / "best.py").read_text().endswith("# time=8")
    assert result.improved and result.speedup == pytest.approx(10.0 / 8.0)
    # the final check used a seed no candidate check used
    final_seed = rec.final[0]["seed"]
    assert final_seed not in [seed for _, seed in executor.calls[:-1]]
    assert executor.closed
    # trial tree: every attempt is a node with its parent and verdict
    store = TrialStore.open_existing(Path(rec.trial_tree))
    nodes = {n.id: n for n in store.nodes()}
    verdicts = [(n.stage, n.verdict, n.accepted) for n in store.nodes()]
    assert verdicts == [
        ("baseline", "correct", False),
        ("dtype_fix", "incorrect", False),
        ("dtype_fix", "correct", False),
        ("dtype_fix", "correct", True),
        ("autotuning", "correct", False),
        ("autotuning", "runtime_error", False),
        ("final", "correct", False),
    ]
    assert nodes["t1"].parent == "t0" and nodes["t4"].parent == "t3" and nodes["t6"].parent == "t3"
    assert nodes["t1"].speedup is None and nodes["t3"].speedup == pytest.approx(10.0 / 8.0)
    # the run record is on disk, complete, and has no secret
    saved = json.loads(Path(result.record_path).read_text())
    assert saved["status"] == "done" and saved["outputs"] == [str(tmp_path / "best.py")]
    assert {i["category"] for i in saved["issues"]} >= {"float64_usage", "missing_autotune"}


def test_fresh_check_failure_drops_the_composite_and_best_k(tmp_path: Path) -> None:
    dtype = ScriptedStage("dtype_fix", [[BASE + "# time=8"]])
    # faster, but wrong on the final check's fresh inputs
    tune = ScriptedStage("autotuning", [[BASE + "# time=5\n# fails-from-seed=1000000"]])
    result, _ = _run(tmp_path, [dtype, tune], settings_kw={"best_k": 2}, seed=0)
    final = result.record.final
    assert final[0]["stage"] == "dtype_fix" and final[0]["verdict"] == "correct"
    dropped = [e for e in final if e.get("dropped")]
    assert len(dropped) == 1 and dropped[0]["stage"] == "autotuning"
    assert result.outputs == [tmp_path / "best.py"]  # only one survivor, so only one file
    assert (tmp_path / "best.py").read_text().endswith("# time=8")


def test_best_k_writes_ranked_files(tmp_path: Path) -> None:
    dtype = ScriptedStage("dtype_fix", [[BASE + "# time=8"]])
    tune = ScriptedStage("autotuning", [[BASE + "# time=5"]])
    result, _ = _run(tmp_path, [dtype, tune], settings_kw={"best_k": 2})
    assert result.outputs == [tmp_path / "best.py", tmp_path / "best.rank2.py"]
    assert (tmp_path / "best.py").read_text().endswith("# time=5")
    assert (tmp_path / "best.rank2.py").read_text().endswith("# time=8")


def test_resume_reuses_measurements_and_refuses_other_kernel(tmp_path: Path) -> None:
    stages = lambda: [ScriptedStage("dtype_fix", [[BASE + "# time=8"]])]  # noqa: E731
    first, ex1 = _run(tmp_path, stages())
    second, ex2 = _run(tmp_path, stages())
    # second run: baseline and the candidate come from the tree; only the final fresh check runs
    assert len(ex1.calls) == 5 and len(ex2.calls) == 1
    store = TrialStore.open_existing(Path(second.record.trial_tree))
    reused = [n for n in store.nodes() if n.reused_from]
    assert [n.reused_from for n in reused] == ["t1"]
    store.close()
    # a different kernel under the same (named) trial tree is refused, not mixed in
    with pytest.raises(InputError, match="kernel_sha"):
        _run(tmp_path, stages(), base="# time=3", trial_name="kern")
    # so are verdicts stored under other tolerances
    with pytest.raises(InputError, match="tolerances: tree has 'rtol=0.01"):
        _run(tmp_path, stages(), settings_kw={"correctness_rtol": 0.1}, trial_name="kern")
    # without --name, the other kernel gets a tree of its own next to the first
    third, _ = _run(tmp_path, stages(), base="# time=3")
    assert Path(third.record.trial_tree).name.startswith("kern-ci-")
    assert Path(third.record.trial_tree) != Path(second.record.trial_tree)


def test_interpreter_timings_only_accept_in_correctness_only_stages(tmp_path: Path) -> None:
    def stages():
        return [ScriptedStage("dtype_fix", [[BASE + "# time=8"]])]

    result, _ = _run(tmp_path / "a", stages(), executor=ScriptedExecutor(interpreter=True))
    assert not result.improved
    assert any("interpreter" in w for w in result.record.warnings)
    assert "interpreter timings cannot show a speedup" in str(result.record.stages[0])
    assert (tmp_path / "a" / "best.py").read_text().endswith("# noisy=10,10.2,9.9\n")

    result, _ = _run(
        tmp_path / "b",
        stages(),
        executor=ScriptedExecutor(interpreter=True),
        correctness_only_stages={"dtype_fix"},
    )
    assert result.improved and result.record.stages[0].status == "improved"


def test_requested_stage_runs_without_issue_and_missing_impl_is_reported(tmp_path: Path) -> None:
    fusion = ScriptedStage("fusion", [[BASE + "# time=7"]])
    result, _ = _run(tmp_path, [fusion], stages=["fusion", "dtype_fix"])
    plan = result.record.plan
    assert plan == [{"stage": "fusion", "reason": "requested with --stages (no issue detected)"}]
    assert result.record.skipped_stages["dtype_fix"] == "no implementation for this DSL and engine"
    assert "not selected by --stages" in result.record.skipped_stages["autotuning"]


def test_max_trials_budget_and_no_new_candidates(tmp_path: Path) -> None:
    same = BASE + "# time=9.95"
    dtype = ScriptedStage("dtype_fix", [[same], [same], [same]])
    tune = ScriptedStage("autotuning", [[BASE + f"# time={9.9 + i / 1000}" for i in range(10)]])
    result, _ = _run(tmp_path, [dtype, tune], settings_kw={"max_trials": 4})
    stages = {s.stage: s for s in result.record.stages}
    assert stages["dtype_fix"].attempts == 2 and "no new candidate" in stages["dtype_fix"].notes[-1]
    assert len(stages["autotuning"].nodes) == 3  # candidates only (not baseline/final): 1 + 3 = MAX_TRIALS 4
    assert any("MAX_TRIALS=4" in n for n in stages["autotuning"].notes)


def test_invalid_candidates_are_not_run_and_broken_baseline_stops(tmp_path: Path) -> None:
    dtype = ScriptedStage("dtype_fix", [[BASE + "# invalid\n# time=1"]])
    result, executor = _run(tmp_path / "a", [dtype])
    assert result.record.stages[0].verdicts == {"invalid": 1}
    assert not any("# invalid" in src for src, _ in executor.calls)

    with pytest.raises(KernelpilotError, match="fails its own check.*tolerances first"):
        _run(tmp_path / "b", [dtype], base="# wrong")
    record = json.loads(next((tmp_path / "b" / "logs").glob("run-*.json")).read_text())
    assert record["status"] == "failed" and "fails its own check" in record["error"]


def test_side_by_side_confirms_acceptance_and_final_speedup(tmp_path: Path) -> None:
    from tests.support.pipeline_doubles import SideBySideExecutor

    dtype = ScriptedStage(
        "dtype_fix",
        [
            [BASE + "# time=8\n# sbs=9.95"],  # looked faster alone, is not side by side (drift)
            [BASE + "# time=8.1\n# sbs=8"],  # confirmed
        ],
    )
    executor = SideBySideExecutor()
    result, _ = _run(tmp_path, [dtype], executor=executor, seed=0)
    report = result.record.stages[0]
    assert report.accepted == "t2" and "side by side 9.95 ms is not faster" in report.rejected["t1"]
    store = TrialStore.open_existing(Path(result.record.trial_tree))
    assert store.get("t1").extra["side_by_side"]["candidate_ms"] == 9.95
    assert store.get("t2").extra["side_by_side"]["input_ms"] == 10.0
    # final: [original, composite] side by side on one fresh seed
    final = result.record.final[0]
    assert final["side_by_side"] and final["baseline_ms_side_by_side"] == 10.0
    assert final["speedup"] == pytest.approx(10.0 / 8.0)
    sources, seed = executor.side_by_side_calls[-1]
    assert sources[0] == (tmp_path / "kern.py").read_text() and seed == 1_000_003


def test_side_by_side_final_check_drops_wrong_composite(tmp_path: Path) -> None:
    from tests.support.pipeline_doubles import SideBySideExecutor

    dtype = ScriptedStage("dtype_fix", [[BASE + "# time=8"]])
    tune = ScriptedStage("autotuning", [[BASE + "# time=5\n# fails-from-seed=1000000"]])
    result, _ = _run(
        tmp_path, [dtype, tune], executor=SideBySideExecutor(), settings_kw={"best_k": 2}, seed=0
    )
    final = result.record.final
    assert [e["stage"] for e in final] == ["dtype_fix", "autotuning"]
    assert final[1]["dropped"] and final[0]["speedup"] == pytest.approx(10.0 / 8.0)
    assert result.outputs == [tmp_path / "best.py"]


def test_executor_that_cannot_run_on_the_device_stops_before_the_baseline(tmp_path: Path) -> None:
    from kernelpilot.errors import ToolMissingError

    class CompileOnly(ScriptedExecutor):
        def runnable_on(self, device: str) -> str | None:
            return "CUDA sources need an NVIDIA GPU" if device == "cuda" else None

    executor = CompileOnly()
    with pytest.raises(
        ToolMissingError, match="cannot run on device 'cuda': CUDA sources need an NVIDIA GPU"
    ):
        _run(tmp_path, [], executor=executor)
    assert executor.calls == []
