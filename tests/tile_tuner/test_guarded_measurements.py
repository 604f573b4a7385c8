"""Impossible measurements are rejected wherever they enter: a program's result line, a replayed or
stored row.  A zero median must not divide a FLOP count, a NaN or negative time must not become the
best config, and ``status: ok`` with ``verification.passed: false`` is a wrong result."""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from kernelpilot.tile_tuner.runner import run_program
from tests.support import REPO

STORE = REPO / "tests" / "data" / "replay" / "h200_gemm_bf16.sqlite"
GT_SPACE = {"tile_k": [64], "cluster": [[1, 1], [2, 1], [1, 2]], "schedule": ["cooperative", "pingpong"]}
SHAPE = '{"K":4096,"M":4096,"N":4096}'


def _program(tmp: Path, median: str, passed: str = "true") -> list[str]:
    """A real subprocess printing one result line of the benchmark-program contract."""
    line = (
        '{"status": "ok", "kernel": "gemm", "config": {}, "problem": {}, '
        f'"time_ms": {{"median": {median}, "min": 0.5, "max": 2.0, "repetitions": 3}}, '
        f'"verification": {{"passed": {passed}}}}}'
    )
    script = tmp / "prog.py"
    script.write_text(f"print({line!r})\n")
    return [sys.executable, str(script)]


@pytest.mark.parametrize("median", ["0", "-1.5", "NaN", "Infinity", "1e-320"])
def test_a_program_claiming_an_impossible_time_is_invalid_timing(median, tmp_path):
    out = run_program(_program(tmp_path, median), None, 30)
    if median == "1e-320":  # tiny but a finite positive float: plausible for the parser, kept
        assert out.status == "ok"
        return
    assert out.status == "invalid_timing" and "median" in out.message, out


def test_status_ok_with_failed_verification_is_a_wrong_result(tmp_path):
    out = run_program(_program(tmp_path, "1.0", passed="false"), None, 30)
    assert out.status == "wrong_result" and "verification.passed is false" in out.message


def _doctor(store: Path) -> dict[str, str]:
    """Plant impossible rows for the fastest configs of one shape; returns config_key -> planted."""
    con = sqlite3.connect(store)
    rows = con.execute(
        "select key, config_key, result from measurements where problem=? order by time_ms limit 4", (SHAPE,)
    ).fetchall()
    planted = {}
    for (key, config_key, result), (what, median) in zip(
        rows, [("zero", 0.0), ("negative", -0.01), ("nan", math.nan), ("unverified", None)], strict=True
    ):
        doc = json.loads(result)
        if what == "unverified":
            doc["verification"] = {"passed": False}
        else:
            doc["time_ms"] = {**doc["time_ms"], "median": median}
        con.execute(
            "update measurements set result=?, time_ms=? where key=?",
            (json.dumps(doc), None if median is None or math.isnan(median) else median, key),
        )
        planted[config_key] = what
    con.commit()
    con.close()
    return planted


def test_impossible_replayed_rows_never_crash_the_tune_or_become_the_best(tmp_path):
    from kernelpilot.dsl_plugins.cuda.gemm import CutlassSm90Gemm
    from kernelpilot.targets import get_target_model
    from kernelpilot.tile_tuner.engine import TuneEngine
    from kernelpilot.tile_tuner.store import ResultsStore, canonical
    from kernelpilot.tile_tuner.summary import summarize_state
    from kernelpilot.tile_tuner.workload import TuneOptions, Workload

    replay = tmp_path / "replay.sqlite"
    shutil.copy(STORE, replay)
    planted = _doctor(replay)
    opts = TuneOptions(
        out_dir=tmp_path, store_path=tmp_path / "s.sqlite", cache_dir=tmp_path / "c", replay=replay
    )
    wl = Workload(name="w", kernel="gemm", dtype="bf16", dims={"M": 4096, "N": 4096, "K": 4096}, target="sm90",
                  proposer="exhaustive", budget_configs=100, space_filter=GT_SPACE)  # fmt: skip
    store = ResultsStore(opts.store_path)
    [s] = TuneEngine(get_target_model("sm90"), CutlassSm90Gemm(), "sm90", opts, store).run([wl])
    by_key = {canonical({**t.config, "dtype": "bf16", "kernel": "gemm"}): t for t in s.tried}
    seen = {what: by_key[k].status for k, what in planted.items() if k in by_key}
    assert seen == {"zero": "invalid_timing", "negative": "invalid_timing", "nan": "invalid_timing",
                    "unverified": "wrong_result"}, seen  # fmt: skip
    best = s.best()
    assert (
        best is not None
        and best.time_ms > 0
        and canonical({**best.config, "dtype": "bf16", "kernel": "gemm"}) not in planted
    )
    doc = summarize_state(s, "sm90", None, CutlassSm90Gemm())
    assert doc["best"]["time_ms"] > 0
    assert doc["speedup_vs_default"] is None or doc["speedup_vs_default"] > 0
    # nothing impossible was stored as ok
    bad = [m for m in store.all() if m.status == "ok" and not (m.time_ms and m.time_ms > 0)]
    store.close()
    assert bad == []
