"""Many hosts, on CPUs: a Dask LocalCluster whose (two) workers declare fake ``GPU`` resources runs a batch
through the replay backend.  Every workload must finish, the results must equal the single-process
run, and a worker killed while it runs a benchmark task must lose and duplicate nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")

from kernelpilot.tile_tuner.api import run_batch  # noqa: E402
from kernelpilot.tile_tuner.batch import load_batch  # noqa: E402
from kernelpilot.tile_tuner.store import ResultsStore  # noqa: E402
from kernelpilot.tile_tuner.workload import TuneOptions  # noqa: E402
from tests.support.scaleout import comparable, replay_store, write_batch  # noqa: E402


class ExitOnFirstBenchmark(distributed.WorkerPlugin):
    """Fault injection from the outside: the first worker that starts executing a benchmark task
    while ``marker`` exists claims the marker (atomic rename) and dies on the spot (``os._exit``),
    with the task in flight.  Exactly one worker dies, whatever the scheduling."""

    name = "kp-kill-once"

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def transition(self, key, start, finish, **kwargs) -> None:
        name = key if isinstance(key, str) else str(key)
        if finish == "executing" and name.startswith(("kp-replay-", "kp-bench-")):
            try:
                os.rename(self.marker, self.marker + ".claimed")
            except OSError:
                return
            os._exit(1)


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scaleout")
    db, problems = replay_store(tmp)
    path = write_batch(tmp / "batch.yaml", problems[:2], proposers=("model", "random"))
    target, workloads, _ = load_batch(path)
    return tmp, db, path, target, workloads


def _options(tmp: Path, db: Path, name: str, **kw) -> TuneOptions:
    out = tmp / name
    return TuneOptions(
        out_dir=out, store_path=out / "results.sqlite", cache_dir=tmp / "cache", replay=db, **kw
    )


def _counting_store(monkeypatch) -> list[str]:
    """Count every write the client makes (the primary key would hide a duplicate row)."""
    writes: list[str] = []
    original = ResultsStore.record

    def record(self, m):
        writes.append(m.key.digest())
        return original(self, m)

    monkeypatch.setattr(ResultsStore, "record", record)
    return writes


@pytest.fixture(scope="module")
def baseline(batch):
    """The single-process run and the multiset of store writes it made (two workloads on one
    problem legitimately write the same key twice, so duplicates are judged against this)."""
    tmp, db, _, target, workloads = batch
    with pytest.MonkeyPatch.context() as mp:
        writes = _counting_store(mp)
        doc = run_batch(target, workloads, _options(tmp, db, "inprocess"))
    measured = sum(1 for w in doc["workloads"] for t in w["tried"] if t["source"] == "replay")
    assert measured == len(writes) > 10
    assert all(w["best"] for w in doc["workloads"])
    # measurement requests (recorded or not: configs the store lacks are asked for, not written)
    assert doc["executor"]["benchmarks"] >= len(writes)
    return doc, sorted(writes)


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=2, processes=True, resources={"GPU": 1},
        dashboard_address=":0", memory_limit=0, silence_logs=50,
    ) as c:  # fmt: skip
        yield c


def test_gpu_pool_equals_single_process(batch, baseline, monkeypatch):
    tmp, db, _, target, workloads = batch
    writes = _counting_store(monkeypatch)
    doc = run_batch(target, workloads, _options(tmp, db, "pool", gpus="0,1,2"))
    assert comparable(doc) == comparable(baseline[0])
    assert sorted(writes) == baseline[1]
    assert sum(doc["executor"]["benchmarks_per_gpu"].values()) == baseline[0]["executor"]["benchmarks"]


def test_cluster_equals_single_process(batch, baseline, cluster, monkeypatch):
    tmp, db, _, target, workloads = batch
    writes = _counting_store(monkeypatch)
    doc = run_batch(target, workloads, _options(tmp, db, "cluster", cluster=cluster.scheduler_address))
    assert comparable(doc) == comparable(baseline[0])
    assert sorted(writes) == baseline[1]  # the client wrote each result once, as the local run did
    ex = doc["executor"]
    assert ex["executor"] == "dask" and not ex["task_failures"]
    # one task per distinct measurement of a round (two workloads on one problem may share one)
    assert 0 < sum(ex["benchmarks_per_worker"].values()) <= baseline[0]["executor"]["benchmarks"]
    assert ResultsStore(tmp / "cluster" / "results.sqlite").count() == len(set(baseline[1]))


def test_worker_killed_mid_task_loses_and_duplicates_nothing(batch, baseline, cluster, monkeypatch, tmp_path):
    tmp, db, _, target, workloads = batch
    client = distributed.Client(cluster)
    marker = tmp_path / "kill-once"
    marker.write_text("")
    client.register_plugin(ExitOnFirstBenchmark(str(marker)))
    try:
        writes = _counting_store(monkeypatch)
        doc = run_batch(target, workloads, _options(tmp, db, "killed", cluster=cluster.scheduler_address))
    finally:
        client.unregister_worker_plugin(ExitOnFirstBenchmark.name)
        client.close()
    assert not marker.exists() and Path(str(marker) + ".claimed").exists()  # a worker did die mid-task
    assert comparable(doc) == comparable(baseline[0])  # every workload finished with the same results
    assert sorted(writes) == baseline[1]  # nothing lost, nothing recorded twice
    assert not doc["executor"]["task_failures"]  # the lost task was rescheduled, not failed
    assert ResultsStore(tmp / "killed" / "results.sqlite").count() == len(set(baseline[1]))


def test_cluster_local_pins_one_worker_per_gpu(batch, baseline):
    tmp, db, _, target, workloads = batch
    doc = run_batch(target, workloads, _options(tmp, db, "local", cluster="local", gpus="0,1"))
    assert comparable(doc) == comparable(baseline[0])
    ex = doc["executor"]
    assert ex["executor"] == "dask" and ex["gpus"] == ["0", "1"]
    # each worker that ran benchmarks saw exactly its own GPU in CUDA_VISIBLE_DEVICES
    assert ex["worker_gpus"] and all(
        ex["worker_gpus"][w] == w.removeprefix("gpu-") for w in ex["worker_gpus"]
    )


def test_cli_bad_gpus_flag_exits_2_and_writes_nothing(batch, cli, tmp_path):
    _, db, path, _, _ = batch
    bad = tmp_path / "bad"  # (address validation itself: test_scaleout_jobs.py)
    r = cli(
        "tune",
        str(path),
        "--replay",
        str(db),
        "--gpus",
        "0,x",
        "--out",
        str(bad),
        "--store",
        str(bad / "s.sqlite"),
    )
    assert r.returncode == 2, r.stderr
    assert "--gpus" in r.stderr and "0,x" in r.stderr
    assert not (bad / "s.sqlite").exists()


def test_task_that_keeps_killing_workers_is_recorded_as_crashed(batch, baseline, tmp_path):
    """With no failures allowed, the task in flight on a dying worker comes back as KilledWorker: it is
    recorded as ``crashed`` with the reason (like a crashing binary), and the batch goes on."""
    import dask

    tmp, db, _, target, workloads = batch
    marker = tmp_path / "kill-once"
    marker.write_text("")
    # random proposers only: their proposals do not depend on results, so a crashed config changes
    # nothing else (a model proposer would refine differently around a missing time)
    randoms = [w for w in workloads if w.proposer == "random"]
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True, resources={"GPU": 1},
                                 dashboard_address=":0", memory_limit=0, silence_logs=50) as cluster,
        distributed.Client(cluster) as client,
    ):  # fmt: skip
        client.register_plugin(ExitOnFirstBenchmark(str(marker)))
        doc = run_batch(
            target, randoms, _options(tmp, db, "killed_for_good", cluster=cluster.scheduler_address)
        )
    failures = doc["executor"]["task_failures"]
    assert failures and all("KilledWorker" in f for f in failures)
    base = comparable(baseline[0])
    crashed = 0
    for name, w in comparable(doc).items():
        assert len(w["tried"]) == len(base[name]["tried"])  # every workload ran to its budget
        # the same configs, each once; compared by label: the lost tasks' records can arrive when the
        # scheduler gives up on them, after results of tasks that started later
        got_by, want_by = ({t[0]: t for t in tried} for tried in (w["tried"], base[name]["tried"]))
        assert len(got_by) == len(w["tried"]) and got_by.keys() == want_by.keys()
        for label, got in got_by.items():
            if got != want_by[label]:
                assert got[1] == "crashed"  # the same config, recorded as crashed
                crashed += 1
    assert crashed >= 1  # the lost task(s); everything else equals the single-process run
