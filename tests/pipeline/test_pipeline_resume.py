"""A pipeline process killed mid-run (os._exit inside an evaluation) leaves a consistent tree and a
'running' record; the same command again resumes: nothing already measured is measured again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from kernelpilot.trials.store import TrialStore

TESTS = Path(__file__).resolve().parents[2]  # the repository root: the script imports tests.support

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from tests.support.pipeline_doubles import ScriptedExecutor, ScriptedStage
    from kernelpilot.pipeline.runner import Pipeline, PipelineOptions
    from kernelpilot.settings import load_settings

    class DyingExecutor(ScriptedExecutor):
        def evaluate(self, source, *, seed, time_it=True):
            if len(self.calls) + 1 == int(os.environ.get("DIE_AT_CALL", "0")):
                os._exit(9)  # the whole pipeline process dies, mid-evaluation
            return super().evaluate(source, seed=seed, time_it=time_it)

    work = Path({work!r})
    base = (work / "kern.py").read_text().replace("# noisy=10,10.1,9.9\\n", "")
    settings = load_settings(cli={{"trials_dir": str(work / "trials"), "log_dir": str(work / "logs")}}, env_file=None)
    stages = {{
        "dtype_fix": ScriptedStage("dtype_fix", [[base + "# time=8"]]),
        "autotuning": ScriptedStage("autotuning", [[base + "# time=9", base + "# time=6"]]),
    }}
    executor = DyingExecutor()
    options = PipelineOptions(kernel_path=work / "kern.py", spec_path=work / "kern.yaml", variant="ci",
                              dsl="triton", device="cuda", engine="rules", output=work / "out.py",
                              record_path=work / "record.json")
    Pipeline(settings, options, spec=None, executor=executor, stage_impls=stages).run()
    print(json.dumps([src.splitlines()[-1] for src, _ in executor.calls]))
    """
)

BASE = """import triton
import triton.language as tl

@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr).to(tl.float64)
# noisy=10,10.1,9.9
"""


def _run(work: Path, die_at: int | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DIE_AT_CALL": str(die_at or 0)}
    code = SCRIPT.format(tests=str(TESTS), work=str(work))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_killed_run_resumes_without_remeasuring(tmp_path: Path) -> None:
    (tmp_path / "kern.py").write_text(BASE)
    (tmp_path / "kern.yaml").write_text("x: 1\n")
    # calls: 3 baseline timings, dtype_fix candidate, autotuning candidate 1 -> dies in call 6 (candidate 2)
    first = _run(tmp_path, die_at=6)
    assert first.returncode == 9, first.stderr
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["status"] == "running" and [s["stage"] for s in record["stages"]] == ["dtype_fix"]
    store = TrialStore.open_existing(tmp_path / "trials" / "kern")
    assert [(n.id, n.status) for n in store.nodes()] == [
        ("t0", "evaluated"),
        ("t1", "evaluated"),
        ("t2", "evaluated"),
        ("t3", "pending"),  # the candidate being evaluated when the process died
    ]
    store.close()

    second = _run(tmp_path, die_at=None)
    assert second.returncode == 0, second.stderr
    measured = json.loads(second.stdout.strip().splitlines()[-1])
    # only the unfinished candidate and the final fresh check ran; baseline, t1, t2 came from the tree
    assert measured == ["# time=6", "# time=6"]
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["status"] == "done" and record["final"][0]["stage"] == "autotuning"
    assert (tmp_path / "out.py").read_text().endswith("# time=6")
    store = TrialStore.open_existing(tmp_path / "trials" / "kern")
    nodes = {n.id: n for n in store.nodes()}
    assert nodes["t3"].status == "pending"  # kept as evidence, never silently rewritten
    assert nodes["t4"].reused_from == "t1" and nodes["t5"].reused_from == "t2"
    assert nodes["t6"].verdict == "correct" and nodes["t6"].accepted and nodes["t6"].parent == "t4"
