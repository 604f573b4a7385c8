"""The whole loop on recorded H200 measurements (tests/data/replay/h200_gemm_bf16.sqlite): no GPU needed.

The store holds the exhaustive ground truth of benchmarks/gemm_h200.py: 34 configs x 10 bf16 GEMM
shapes measured on an H200 (CUTLASS 4.2.0, nvcc 13.0); see benchmarks/results/gemm_h200_results.json;
plus, for the two M <= 64 shapes, the 30 skinny-tile configs (tile N 16/32) the model adds there
(benchmarks/results/gemm_h200_skinny_run.json), and for M = 16 the 18 swap-AB configs
(benchmarks/results/gemm_h200_swap_run.json), both measured later on the same kind of H200.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.support import REPO, run_cli

STORE = REPO / "tests" / "data" / "replay" / "h200_gemm_bf16.sqlite"
GT_SPACE = {"tile_k": [64], "cluster": [[1, 1], [2, 1], [1, 2]], "schedule": ["cooperative", "pingpong"]}


def _recorded() -> dict[str, tuple[float, str]]:
    """problem json -> (best median ms, config key) straight from SQL, independent of the tuner code."""
    rows = sqlite3.connect(f"file:{STORE}?mode=ro", uri=True).execute(
        "select problem, min(time_ms), config_key from measurements where status='ok' group by problem"
    )
    return {p: (t, c) for p, t, c in rows}


def test_recorded_store_is_complete():
    con = sqlite3.connect(f"file:{STORE}?mode=ro", uri=True)
    assert con.execute(
        "select count(*), count(distinct problem), count(distinct config_key) from measurements"
    ).fetchone() == (340 + 2 * 30 + 18, 10, 34 + 30 + 18)
    assert (
        con.execute("select count(*) from measurements where config_key like '%swap_ab%'").fetchone()[0] == 18
    )
    skinny = (
        "select count(*) from measurements where config_key not like '%swap_ab%' and "
        "(config_key like '%\"tile\":[%,16,%' or config_key like '%\"tile\":[%,32,%')"
    )
    assert con.execute(skinny).fetchone()[0] == 2 * 30
    assert con.execute("select count(*) from measurements where status != 'ok'").fetchone()[0] == 0
    assert {r[0] for r in con.execute("select distinct device from measurements")} == {"NVIDIA H200"}


def test_exhaustive_replay_via_cli_finds_the_recorded_best(tmp_path):
    out = tmp_path / "o"
    r = run_cli("tune", "--target", "sm90", "--kernel", "gemm", "--dims", "M=3000,N=3000,K=3000", "--replay", str(STORE),
                "--proposer", "exhaustive", "--budget-configs", "100", "--space-filter", json.dumps(GT_SPACE),
                "--out", str(out), "--json", "--no-plots")  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    [w] = doc["workloads"]
    best_ms, _ = _recorded()['{"K":3000,"M":3000,"N":3000}']
    assert w["measured_configs"] == 34 and w["best"]["time_ms"] == pytest.approx(best_ms)
    assert w["tried"][0]["is_default"] and {t["source"] for t in w["tried"]} == {"replay"}
    assert (out / "run.json").exists() and (out / "run.csv").read_text().count("\n") == 35


@pytest.mark.parametrize("dims", [
    {"M": 8192, "N": 8192, "K": 8192}, {"M": 4096, "N": 4096, "K": 4096}, {"M": 8192, "N": 6144, "K": 4096},
    {"M": 8192, "N": 28672, "K": 4096}, {"M": 8192, "N": 4096, "K": 14336}, {"M": 4096, "N": 8192, "K": 8192},
    {"M": 64, "N": 28672, "K": 4096}, {"M": 16, "N": 4096, "K": 14336}, {"M": 3000, "N": 3000, "K": 3000},
    {"M": 1024, "N": 1024, "K": 1024},
])  # fmt: skip
def test_model_proposer_reaches_98_percent_of_exhaustive_within_16(tmp_path, dims):
    """The model proposer's target (>= 98 % of the exhaustive best within 16), on the recorded ground truth (batches of 8: one refinement round)."""
    from kernelpilot.dsl_plugins.cuda.gemm import CutlassSm90Gemm
    from kernelpilot.targets import get_target_model
    from kernelpilot.tile_tuner.engine import TuneEngine
    from kernelpilot.tile_tuner.store import ResultsStore
    from kernelpilot.tile_tuner.workload import TuneOptions, Workload

    opts = TuneOptions(
        out_dir=tmp_path,
        store_path=tmp_path / "s.sqlite",
        cache_dir=tmp_path / "c",
        replay=STORE,
        batch_size=8,
    )
    store = ResultsStore(opts.store_path)
    wl = Workload(name="w", kernel="gemm", dtype="bf16", dims=dims, target="sm90", proposer="model",
                  budget_configs=16, space_filter=GT_SPACE)  # fmt: skip
    [s] = TuneEngine(get_target_model("sm90"), CutlassSm90Gemm(), "sm90", opts, store).run([wl])
    best_ms, _ = _recorded()[json.dumps({k: dims[k] for k in ("K", "M", "N")}, separators=(",", ":"))]
    assert s.measured == 16
    assert best_ms / s.best().time_ms >= 0.98


def test_replay_over_the_full_space_skips_unrecorded_configs(tmp_path):
    r = run_cli("tune", "--target", "sm90", "--kernel", "gemm", "--dims", "M=4096,N=4096,K=4096", "--replay", str(STORE),
                "--budget-configs", "8", "--out", str(tmp_path / "o"), "--json", "--no-plots")  # fmt: skip
    assert r.returncode == 0, r.stderr
    [w] = json.loads(r.stdout)["workloads"]
    assert 1 <= w["measured_configs"] <= 8 and all(t["status"] == "ok" for t in w["tried"])


def test_report_rerenders_a_replayed_run(tmp_path):
    out = tmp_path / "o"
    assert run_cli("tune", "--target", "sm90", "--kernel", "gemm", "--dims", "M=1024,N=1024,K=1024", "--replay", str(STORE),
                   "--budget-configs", "4", "--space-filter", json.dumps(GT_SPACE), "--out", str(out)).returncode == 0  # fmt: skip
    r = run_cli("report", str(out / "run.json"))
    assert r.returncode == 0 and "1024" in r.stdout
    assert (out / "roofline.png").exists() and (out / "convergence.png").exists()
    assert Path(out / "report.csv").exists()


def test_result_above_the_device_peak_is_an_error_not_a_record(tmp_path):
    from kernelpilot.dsl_plugins.cuda.gemm import CutlassSm90Gemm
    from kernelpilot.targets import get_target_model
    from kernelpilot.tile_tuner.engine import TuneEngine
    from kernelpilot.tile_tuner.store import ResultsStore
    from kernelpilot.tile_tuner.summary import summarize_state
    from kernelpilot.tile_tuner.workload import TuneOptions, Workload

    class TinyPeak:
        name = "tiny"

        def peak(self, dtype):
            return 100.0  # TFLOP/s: every recorded H200 result (up to ~810) is above it

    opts = TuneOptions(
        out_dir=tmp_path, store_path=tmp_path / "s.sqlite", cache_dir=tmp_path / "c", replay=STORE
    )
    wl = Workload(name="w", kernel="gemm", dtype="bf16", dims={"M": 4096, "N": 4096, "K": 4096}, target="sm90",
                  proposer="exhaustive", budget_configs=3, space_filter=GT_SPACE)  # fmt: skip
    engine = TuneEngine(
        get_target_model("sm90"),
        CutlassSm90Gemm(),
        "sm90",
        opts,
        ResultsStore(opts.store_path),
        device=TinyPeak(),
    )
    [s] = engine.run([wl])
    assert {t.status for t in s.tried} == {"above_peak"} and s.best() is None
    doc = summarize_state(s, "sm90", TinyPeak(), CutlassSm90Gemm())
    from kernelpilot.tile_tuner.report import problems_of

    assert any("ABOVE DEVICE PEAK" in line for line in problems_of({"workloads": [doc]}))
