"""Every reference kernel of the Triton knowledge base runs (TRITON_INTERPRET=1 on the CPU) and matches
its PyTorch ``reference``; the index lists every file, and prompts of the listed stages cite them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest
import yaml

from kernelpilot.pipeline.contracts import STAGE_ORDER
from kernelpilot.plugin_types import ResourceDir

FOLDER = Path(str(files("kernelpilot.knowledge_base").joinpath("triton", "common", "reference_kernels")))
INDEX = yaml.safe_load((FOLDER / "index.yaml").read_text())["reference_kernels"]

RUNNER = r"""
import importlib.util, json, sys, torch
from kernelpilot.dsl_plugins.triton.worker import interpreter_autotune_timer
interpreter_autotune_timer()  # @triton.autotune has no GPU driver to time with under the interpreter
results = {}
for path in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location("ref_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    model = module.Model(*module.INIT_ARGS)
    inputs = module.get_example_inputs()
    with torch.no_grad():
        out = model(*inputs)
        ref = module.reference(model, *inputs)
    outs = out if isinstance(out, tuple) else (out,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    errors = [float((o.float() - r.float()).abs().max()) for o, r in zip(outs, refs)]
    ok = len(outs) == len(refs) and all(torch.allclose(o.float(), r.float(), rtol=1e-3, atol=1e-3) for o, r in zip(outs, refs))
    results[path] = {"ok": bool(ok), "max_abs_error": errors}
print(json.dumps(results))
"""


def test_index_lists_every_reference_kernel_with_known_stages() -> None:
    listed = {e["file"] for e in INDEX}
    assert listed == {p.name for p in FOLDER.glob("*.py")}
    for entry in INDEX:
        assert entry["stages"] and set(entry["stages"]) <= set(STAGE_ORDER), entry["id"]
        assert entry["description"] and entry["shows"], entry["id"]
    covered = {s for e in INDEX for s in e["stages"]}
    assert {"algorithmic", "fusion", "memory_access", "block_pointers", "persistent_kernel"} <= covered


def test_every_reference_kernel_runs_and_matches_its_reference() -> None:
    paths = [str(FOLDER / e["file"]) for e in INDEX]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, *paths], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    bad = {Path(p).name: r for p, r in results.items() if not r["ok"]}
    assert not bad, bad
    assert len(results) == len(INDEX)


@pytest.mark.parametrize("stage", ["block_pointers", "persistent_kernel", "fusion"])
def test_prompts_of_a_stage_cite_its_reference_kernels(stage: str) -> None:
    from kernelpilot.llm.knowledge import load_knowledge

    kb = [ResourceDir(dsl="triton", path=Path(str(files("kernelpilot.knowledge_base").joinpath("triton"))))]
    text = "\n".join(load_knowledge(kb, "triton", "cuda", stage, max_chars=40000))
    for entry in INDEX:
        cited = f"[reference kernel] {entry['id']}" in text
        assert cited == (stage in entry["stages"]), (stage, entry["id"])
    first = next(e for e in INDEX if stage in e["stages"])
    assert (FOLDER / first["file"]).read_text().split('"""', 2)[2].strip()[:200] in text  # the code itself


@pytest.mark.parametrize("device", ["cuda", "xpu"])
def test_knowledge_base_covers_every_stage_and_the_device(device: str) -> None:
    from kernelpilot.llm.knowledge import load_knowledge

    kb = [ResourceDir(dsl="triton", path=Path(str(files("kernelpilot.knowledge_base").joinpath("triton"))))]
    for stage in STAGE_ORDER:
        if stage == "discovery":
            continue
        snippets = load_knowledge(kb, "triton", device, stage, max_chars=10**6)
        own = [s for s in snippets if s.startswith("[pattern]") or s.startswith("[reference kernel]")]
        assert len(own) >= 2, (stage, len(own))
    specific = "\n".join(load_knowledge(kb, "triton", device, "device_specific", max_chars=10**6))
    hopper, xe = "Tile shapes that map onto warp-group MMA", "Large GRF halves the hardware threads"
    assert (hopper in specific) == (device == "cuda") and (xe in specific) == (device == "xpu")
    constraints = load_knowledge(kb, "triton", device, None, max_chars=10**6)
    assert len(constraints) >= 10 and all(c.startswith("[constraint]") for c in constraints)
