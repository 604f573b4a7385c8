"""A tuned FMHA prefill config with ``lpt`` (every head's longest Q tile first) exports as it was tuned:
the exported kernel carries the across-heads scheduler and the label the run knows it by.

The run is the recorded H200 prefill run (tests/data/records/attention_h200_run_kinds.json) with its
winner's config given ``lpt``, as a run whose refinement picked the knob would write it.
"""

from __future__ import annotations

import json

from tests.conftest import REPO, run_cli

RUN = REPO / "tests" / "data" / "records" / "attention_h200_run_kinds.json"


def test_an_lpt_winner_exports_with_its_scheduler(tmp_path):
    run = json.loads(RUN.read_text())["fa_prefill"]
    (w,) = run["workloads"]
    assert w["dims"]["causal"]
    w["best"]["config"] = {**w["best"]["config"], "lpt": True}
    doc = tmp_path / "fa_prefill.json"
    doc.write_text(json.dumps(run))
    out = tmp_path / "out"
    r = run_cli("export", str(doc), "--out", str(out), "--name", "kpl", "--no-bundle-cutlass",
                "--min-vendor-ratio", "0")  # fmt: skip
    assert r.returncode == 0, r.stderr
    dispatch = json.loads((out / "dispatch.json").read_text())
    (kernel,) = dispatch["attention"]["kernels"]
    assert kernel["config"]["lpt"] is True and kernel["label"].endswith("_lpt_causal"), kernel
    source = (out / "csrc" / "attention" / f"{kernel['id']}.cu").read_text()
    assert "struct KpLongestFirstScheduler : IndividualTileScheduler" in source
    assert "int(gridDim.x) - 1 - linear / heads" in source
    (entry,) = dispatch["attention"]["entries"]
    assert entry["route"] == "kernel" and entry["kernel"] == kernel["id"]
