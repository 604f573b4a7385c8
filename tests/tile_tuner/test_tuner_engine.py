"""The tuning loop end to end on CPU: real CMake + ninja builds of a toy C++ program (tests/support/tuner_doubles.py)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from kernelpilot.tile_tuner.engine import TuneEngine
from kernelpilot.tile_tuner.store import ResultsStore
from kernelpilot.tile_tuner.workload import TuneOptions, Workload
from tests.support.tuner_doubles import ToyKernel, ToyModel, toy_time_ms

pytestmark = pytest.mark.skipif(shutil.which("c++") is None, reason="needs a host C++ compiler")


def _opts(tmp: Path, **kw) -> TuneOptions:
    kw.setdefault("batch_size", 32)  # few rounds: each round configures one CMake project
    return TuneOptions(
        out_dir=tmp / "out",
        store_path=tmp / "store.sqlite",
        cache_dir=tmp / "cache",
        jobs=2,
        run_timeout_s=10,
        **kw,
    )


def _run(tmp: Path, workloads: list[Workload], **kw):
    opts = _opts(tmp, **kw)
    store = ResultsStore(opts.store_path)
    engine = TuneEngine(ToyModel(), ToyKernel(), "toy", opts, store)
    states = engine.run(workloads)
    store.close()
    return engine, states


def _wl(name="w", proposer="exhaustive", budget=100, dims=None, **kw) -> Workload:
    return Workload(name=name, kernel="gemm", dtype="bf16", dims=dims or {"M": 1000, "N": 1000, "K": 8},
                    target="toy", proposer=proposer, budget_configs=budget, **kw)  # fmt: skip


def test_exhaustive_finds_true_best_default_first_and_caches(tmp_path):
    engine, [s] = _run(tmp_path, [_wl()])
    space = list(ToyModel().enumerate("gemm", "bf16"))
    assert s.measured == len(space)  # every legal config, nothing illegal
    assert s.tried[0].is_default and s.tried[0].label == "32x32_a"
    best = s.best()
    assert best.label == "64x64_b"
    assert best.time_ms == pytest.approx(toy_time_ms((64, 64), "b", 1000, 1000))
    # every binary is in the content-addressed cache
    assert len(list((tmp_path / "cache").glob("*/program"))) == len(space)


def test_second_run_measures_nothing_and_builds_nothing(tmp_path):
    _run(tmp_path, [_wl()])
    cache_before = {p: p.stat().st_mtime for p in (tmp_path / "cache").glob("*/program")}
    engine, [s] = _run(tmp_path, [_wl()])
    assert {t.source for t in s.tried} == {"store"}
    assert {p: p.stat().st_mtime for p in (tmp_path / "cache").glob("*/program")} == cache_before
    # --remeasure runs again (but still builds nothing)
    engine, [s] = _run(tmp_path, [_wl()], remeasure=True)
    assert {t.source for t in s.tried} == {"measured"}


def test_shapes_share_binaries(tmp_path):
    engine, states = _run(
        tmp_path, [_wl("a", budget=6), _wl("b", budget=6, dims={"M": 64, "N": 4096, "K": 8})]
    )
    n_bins = len(list((tmp_path / "cache").glob("*/program")))
    labels = {t.label for s in states for t in s.tried}
    assert n_bins == len(labels)  # one binary per config, shared by both shapes


def test_failure_is_recorded_as_model_disagreement_and_batch_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv("TOY_FAIL", "64x64_b")
    engine, [s] = _run(tmp_path, [_wl()])
    failed = [t for t in s.tried if t.status != "ok"]
    assert [(t.label, t.status) for t in failed] == [("64x64_b", "wrong_result")]
    assert s.best().label != "64x64_b"
    from kernelpilot.tile_tuner.summary import summarize_state

    doc = summarize_state(s, "toy", None, ToyKernel())
    assert doc["model_disagreements"][0]["label"] == "64x64_b"


def test_hung_binary_times_out_and_is_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("TOY_HANG", "32x32_a")
    opts = _opts(tmp_path)
    opts.run_timeout_s = 1.0
    store = ResultsStore(opts.store_path)
    states = TuneEngine(ToyModel(), ToyKernel(), "toy", opts, store).run([_wl(budget=3)])
    assert states[0].tried[0].status == "timeout"
    assert any(t.status == "ok" for t in states[0].tried)


def test_model_proposer_respects_budget_and_beats_random_on_average(tmp_path):
    _, [m] = _run(tmp_path / "m", [_wl(proposer="model", budget=6)], batch_size=3)
    assert m.measured == 6
    assert m.tried[0].is_default
    model_best = m.best().time_ms
    rand = []
    for seed in range(4):
        _, [r] = _run(tmp_path / f"r{seed}", [_wl(proposer="random", budget=6, seed=seed)], batch_size=3)
        rand.append(r.best().time_ms)
    assert model_best <= sorted(rand)[len(rand) // 2]


def test_kill_keeps_measurements(tmp_path):
    """Rows are committed one by one: a store opened while the run is going sees finished rows."""
    _run(tmp_path, [_wl(budget=4)])
    rows = (
        sqlite3.connect(tmp_path / "store.sqlite").execute("select count(*) from measurements").fetchone()[0]
    )
    assert rows == 4


def test_replay_serves_recorded_measurements_without_building(tmp_path):
    _run(tmp_path / "rec", [_wl()])
    engine, [s] = _run(
        tmp_path / "rep", [_wl(proposer="model", budget=5)], replay=tmp_path / "rec" / "store.sqlite"
    )
    assert not (tmp_path / "rep" / "cache").exists() or not list(
        (tmp_path / "rep" / "cache").glob("*/program")
    )
    assert {t.source for t in s.tried} == {"replay"}
    assert s.measured == 5
