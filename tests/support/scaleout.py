"""Shared helpers for the scale-out tests: a replay store and the batch that runs on it.

Replay data: the recorded H200 store (``tests/data/replay/*.sqlite``) when it is in the tree;
otherwise a store this module records itself through the results-store API.  The self-recorded store is
clearly synthetic (device ``synthetic-test``): time = the sm90 cost model's estimate times a
deterministic per-config factor, plus a few failing configs.  The scale-out tests compare executors
with each other on the same store, so they need *some* fixed measurements, not true ones.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from tests.support import REPO

RECORDED = sorted((REPO / "tests" / "data" / "replay").glob("*.sqlite"))
SYNTHETIC_PROBLEMS = [
    {"M": 4096, "N": 4096, "K": 4096},
    {"M": 8192, "N": 6144, "K": 4096},
    {"M": 1024, "N": 1024, "K": 1024},
]


def _factor(key: str) -> float:
    return 1.0 + int(hashlib.sha256(key.encode()).hexdigest()[:6], 16) / 0xFFFFFF * 0.6


def record_synthetic_store(path: Path, problems: list[dict[str, Any]] | None = None) -> Path:
    """Record every legal sm90 bf16 GEMM config of ``problems`` into a new store at ``path``."""
    from kernelpilot.targets import get_target_model
    from kernelpilot.tile_tuner.api import resolve_device
    from kernelpilot.tile_tuner.kernels import get_tile_kernel
    from kernelpilot.tile_tuner.space import SearchSpace, config_key
    from kernelpilot.tile_tuner.store import Measurement, MeasurementKey, ResultsStore, problem_key

    model = get_target_model("sm90")
    kernel = get_tile_kernel("gemm", "sm90")
    device = resolve_device("sm90", None)
    store = ResultsStore(path)
    for dims in problems or SYNTHETIC_PROBLEMS:
        problem = kernel.validate_problem(dims, "bf16", "synthetic")
        space = SearchSpace(model, "gemm", problem["dtype"], problem, device, None, True)
        configs = [space.default(), *space.configs]
        for i, cfg in enumerate(configs):
            ck = config_key(cfg)
            key = MeasurementKey(
                "sm90", "synthetic-test", "synthetic", "synthetic", kernel.template_version, "gemm",
                problem["dtype"], problem["layout"], problem_key(problem), ck,
            )  # fmt: skip
            est_ms = float(space.estimate(cfg)) * 1e3
            if i % 17 == 5:  # a few failures, so failed statuses travel through the executors too
                store.record(Measurement(key=key, status="wrong_result", reason="synthetic failure"))
                continue
            t = est_ms * _factor(ck + problem_key(problem))
            result = {
                "status": "ok",
                "time_ms": {"median": t, "min": t * 0.99, "max": t * 1.02, "repetitions": 5},
            }
            store.record(Measurement(key=key, status="ok", time_ms=t, time_min_ms=t * 0.99, time_max_ms=t * 1.02,
                                     runtime={"raster": "M"}, result=result, run_s=0.5))  # fmt: skip
    store.close()
    return path


def replay_store(tmp_dir: Path, n_problems: int = 2) -> tuple[Path, list[dict[str, Any]]]:
    """(store path, problems it covers): the recorded H200 store if committed, else a synthetic one."""
    import json

    from kernelpilot.tile_tuner.store import ResultsStore

    if RECORDED:
        store = ResultsStore(RECORDED[0], readonly=True)
        problems = [json.loads(p) for p in store.problems("sm90", "gemm", "bf16")][:n_problems]
        store.close()
        if problems:
            return RECORDED[0], problems
    problems = SYNTHETIC_PROBLEMS[:n_problems]
    path = record_synthetic_store(tmp_dir / "synthetic_replay.sqlite", problems)
    return path, [dict(p, layout="rr") for p in problems]


def write_batch(
    path: Path, problems: list[dict[str, Any]], proposers: tuple[str, ...] = ("model", "random", "exhaustive")
) -> Path:
    """A native batch YAML with one workload per (problem, proposer)."""
    import yaml

    workloads = []
    for i, dims in enumerate(problems):
        for proposer in proposers:
            workloads.append(
                {
                    "name": f"p{i}_{proposer}",
                    "dims": {k: v for k, v in dims.items() if k in ("M", "N", "K")},
                    "proposer": proposer,
                    "budget_configs": 10,
                }
            )
    doc = {
        "target": "sm90",
        "defaults": {"kernel": "gemm", "dtype": "bf16", "seed": 3, "layout": "rr"},
        "workloads": workloads,
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """What must be identical between executors: per workload every config tried, in order, with
    its status and time, and the best config."""
    out = {}
    for w in doc["workloads"]:
        out[w["name"]] = {
            "tried": [(t["label"], t["status"], t["time_ms"], t["is_default"]) for t in w["tried"]],
            "best": (w["best"] or {}).get("label"),
            "stop": w["stop_reason"],
        }
    return out
