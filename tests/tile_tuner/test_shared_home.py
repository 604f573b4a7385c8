"""Several processes sharing one home (results store + build cache) on one batch.

Four real processes tune the same toy batch at once: real CMake + ninja builds of a small C++
program (tests/support/tuner_doubles.py) through a compiler wrapper that logs every compile, and a
program that logs every benchmark run.  Each config must be compiled once and run once in total,
every process must end with every config ``ok`` (no ``crashed`` from a binary deleted under it, no
ENOTEMPTY), and every process must report the same best.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter

import pytest

from tests.support import REPO

pytestmark = pytest.mark.skipif(shutil.which("c++") is None, reason="needs a host C++ compiler")

WORKER = r"""
import json, sys
from pathlib import Path
from kernelpilot.tile_tuner.engine import TuneEngine
from kernelpilot.tile_tuner.workload import TuneOptions, Workload
from kernelpilot.tile_tuner.store import ResultsStore
from tests.support.tuner_doubles import ToyKernel, ToyModel

home, out, compiler = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
kernel = ToyKernel()
kernel.compiler = compiler
opts = TuneOptions(out_dir=out, store_path=home / "results.sqlite", cache_dir=home / "build_cache",
                   jobs=2, batch_size=16, run_timeout_s=30)
store = ResultsStore(opts.store_path)
wl = Workload(name="w", kernel="gemm", dtype="bf16", dims={"M": 500, "N": 500, "K": 8}, target="toy",
              proposer="exhaustive", budget_configs=100, space_filter={"schedule": ["b"]})
[s] = TuneEngine(ToyModel(), kernel, "toy", opts, store).run([wl])
store.close()
print(json.dumps({"tried": [[t.label, t.status, t.source] for t in s.tried], "best": s.best().label}))
"""


def test_four_processes_sharing_one_home_build_and_measure_each_config_once(tmp_path):
    home = tmp_path / "home"
    compiles = tmp_path / "compiles.log"
    runs = tmp_path / "runs.log"
    wrapper = tmp_path / "toycxx"
    wrapper.write_text(f'#!/bin/sh\ncase "$*" in *" -c "*) echo "$*" >> {compiles};; esac\nexec c++ "$@"\n')
    wrapper.chmod(0o755)
    env = {**os.environ, "TOY_CALL_LOG": str(runs), "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(home), str(tmp_path / f"out{i}"), str(wrapper)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
        )  # fmt: skip
        for i in range(4)
    ]
    docs = []
    for p in procs:
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0, err[-3000:]
        docs.append(json.loads(out.strip().splitlines()[-1]))
    labels = {label for d in docs for label, _, _ in d["tried"]}
    assert len(labels) == 16  # the default (32x32_a) + 4 x 4 tiles with schedule b minus 128x128
    for d in docs:
        assert sorted(label for label, _, _ in d["tried"]) == sorted(labels)
        assert {status for _, status, _ in d["tried"]} == {"ok"}, d["tried"]
        assert d["best"] == "64x64_b"
    targets = [re.search(r"(kp_[0-9a-f]+)/toy\.cpp", line) for line in compiles.read_text().splitlines()]
    compiled = Counter(m.group(1) for m in targets if m)  # (CMake's own compiler probes excluded)
    assert len(compiled) == 16 and set(compiled.values()) == {1}, compiled
    ran = Counter(runs.read_text().split())
    assert set(ran) == labels and set(ran.values()) == {1}, ran
    sources = Counter(src for d in docs for _, _, src in d["tried"])
    assert sources["measured"] == 16 and sources["store"] == 48, sources
    # nothing half-published: only entries with a manifest, no temp or evicted folders left
    cache = home / "build_cache"
    assert not [p for p in cache.iterdir() if p.name.startswith(".") and p.name != ".locks"]
    assert all((e / "MANIFEST.json").is_file() for e in cache.iterdir() if not e.name.startswith("."))
