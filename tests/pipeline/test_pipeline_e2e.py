"""Pipeline with the REAL Triton executor (worker processes, TRITON_INTERPRET=1 on CPU): candidates that
hang, crash, or compute the wrong thing are rejected with their verdicts and the run goes on."""

from __future__ import annotations

import shutil
from pathlib import Path

from kernelpilot.pipeline.runner import Pipeline, PipelineOptions
from kernelpilot.settings import load_settings
from kernelpilot.trials.store import TrialStore
from tests.support import REPO
from tests.support.pipeline_doubles import ScriptedStage

EXAMPLE = REPO / "examples" / "softmax"


def test_hang_crash_wrong_are_rejected_and_good_is_kept(tmp_path: Path) -> None:
    from kernelpilot.dsl_plugins.triton.executor import TritonExecutor
    from kernelpilot.spec import load_spec

    for name in ("softmax.py", "softmax_pytorch.py"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    original = (tmp_path / "softmax.py").read_text()
    forward = "        n_rows, n_cols = x.shape\n"
    hang = original.replace(forward, forward + "        import time; time.sleep(600)\n")
    crash = original.replace(forward, forward + "        import os; os._exit(3)\n")
    wrong = original.replace("y = num / den", "y = num / (2.0 * den)")
    good = original.replace(".to(tl.float64)", ".to(tl.float32)")
    assert len({hang, crash, wrong, good, original}) == 5
    stage = ScriptedStage("dtype_fix", [[hang, crash, wrong], [good]])

    settings = load_settings(
        cli={"trials_dir": str(tmp_path / "trials"), "log_dir": str(tmp_path / "logs")}, env_file=None
    )
    executor = TritonExecutor(dsl="triton", device="cpu", settings=settings, timeout_s=30)
    options = PipelineOptions(
        kernel_path=tmp_path / "softmax.py",
        spec_path=EXAMPLE / "softmax.yaml",
        variant="ci",
        dsl="triton",
        device="cpu",
        engine="rules",
        output=tmp_path / "out.py",
        stages=["dtype_fix"],
        correctness_only_stages={"dtype_fix"},
        noise_repeats=1,
    )
    result = Pipeline(
        settings,
        options,
        spec=load_spec(EXAMPLE / "softmax.yaml"),
        executor=executor,
        stage_impls={"dtype_fix": stage},
    ).run()

    report = result.record.stages[0]
    assert report.verdicts == {"timeout": 1, "runtime_error": 1, "incorrect": 1, "correct": 1}
    assert report.accepted == "t4" and (tmp_path / "out.py").read_text() == good
    feedback = "\n".join(stage.contexts[1].feedback)
    assert "timeout" in feedback and "runtime_error" in feedback and "incorrect" in feedback
    store = TrialStore.open_existing(Path(result.record.trial_tree))
    assert [(n.id, n.verdict) for n in store.nodes()] == [
        ("t0", "correct"),
        ("t1", "timeout"),
        ("t2", "runtime_error"),
        ("t3", "incorrect"),
        ("t4", "correct"),
        ("t5", "correct"),  # the fresh final check
    ]
    assert store.get("t5").seed not in {n.seed for n in store.nodes()[:5]}
    assert all(n.status == "evaluated" for n in store.nodes())
