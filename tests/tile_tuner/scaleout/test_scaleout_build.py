"""The real build-and-run path through the scale-out executors, on CPUs.

The toy TileKernel (tests/support/tuner_doubles.py) is a real C++ program built by the real builder (CMake +
ninja + the host compiler) that prints the kernel contract's JSON line; it stands in for the GPU only
in that its "time" is a formula of its config.  Through Dask, programs are compiled in build tasks on
workers, their bytes travel in task results to the workers holding a ``GPU`` resource, and run there;
through the GPU pool they run pinned, several at once.  Both must give what the in-process loop gives.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelpilot.tile_tuner.engine import TuneEngine
from kernelpilot.tile_tuner.scaleout.gpu_pool import GpuPoolExecutor
from kernelpilot.tile_tuner.store import ResultsStore
from kernelpilot.tile_tuner.workload import TuneOptions, Workload
from tests.support.tuner_doubles import ToyKernel, ToyModel

distributed = pytest.importorskip("distributed")
pytestmark = [
    pytest.mark.skipif(shutil.which("c++") is None, reason="needs a host C++ compiler"),
    pytest.mark.slow,  # CMake + ninja projects: ~30-60 s on a busy 2-core machine
]


def _workloads() -> list[Workload]:
    return [
        Workload(
            name=f"w{i}",
            kernel="gemm",
            dtype="bf16",
            dims=dims,
            target="toy",
            proposer=p,
            budget_configs=6,
            seed=1,
        )
        for i, (dims, p) in enumerate(
            [({"M": 1000, "N": 1000, "K": 8}, "exhaustive"), ({"M": 512, "N": 2048, "K": 8}, "random")]
        )
    ]


def _run(tmp: Path, name: str, executor=None, cache: str = "cache", **env):
    opts = TuneOptions(out_dir=tmp / name, store_path=tmp / name / "store.sqlite", cache_dir=tmp / cache, jobs=2,
                       run_timeout_s=20, batch_size=32)  # fmt: skip
    store = ResultsStore(opts.store_path)
    engine = TuneEngine(ToyModel(), ToyKernel(), "toy", opts, store, executor=executor)
    states = engine.run(_workloads())
    rows = store.count()
    store.close()
    tried = {s.workload.name: [(t.label, t.status, t.time_ms) for t in s.tried] for s in states}
    return tried, rows, engine


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("toy")
    tried, rows, _ = _run(tmp, "inprocess")
    assert all(len(v) == 6 for v in tried.values()) and rows >= 6
    assert any(status == "ok" for v in tried.values() for _, status, _ in v)
    return tmp, tried, rows


def test_gpu_pool_runs_real_programs_like_the_loop(baseline):
    tmp, tried, rows = baseline
    pool = GpuPoolExecutor(["0", "1"], "cuda")
    got, got_rows, engine = _run(tmp, "pool", executor=pool, cache="cache_pool")
    pool.close()
    assert got == tried and got_rows == rows
    desc = pool.describe()
    assert desc["builds"] >= 1 and sum(desc["benchmarks_per_gpu"].values()) == sum(
        len(v) for v in tried.values()
    )


def test_dask_builds_on_workers_and_ships_binaries_to_gpu_workers(baseline):
    from kernelpilot.tile_tuner.scaleout.dask_executor import DaskExecutor

    tmp, tried, rows = baseline
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True, resources={"GPU": 1},
                                 dashboard_address=":0", memory_limit=0, silence_logs=50) as cluster,
        distributed.Client(cluster) as client,
    ):  # fmt: skip
        ex = DaskExecutor(cluster.scheduler_address, client=client)
        got, got_rows, _ = _run(tmp, "dask", executor=ex, cache="cache_dask")
        desc = ex.describe()
        ex.close()
    assert got == tried and got_rows == rows
    assert desc["builds"] >= 1 and not desc["task_failures"]
    assert sum(desc["benchmarks_per_worker"].values()) == sum(len(v) for v in tried.values())
    # the programs were built by the workers into the (shared) cache the client named
    assert len([p for p in (tmp / "cache_dask").iterdir() if (p / "program").exists()]) >= 6
