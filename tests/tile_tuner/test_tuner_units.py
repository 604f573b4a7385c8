"""Unit tests of the tuner's parts that need no compiler: store, space filter, proposers, batch files."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from kernelpilot.errors import InputError
from kernelpilot.tile_tuner.batch import load_batch, parse_dims
from kernelpilot.tile_tuner.proposers import History, Observation, make_proposer
from kernelpilot.tile_tuner.space import SearchSpace, config_key, matches_filter
from kernelpilot.tile_tuner.store import Measurement, MeasurementKey, ResultsStore
from tests.support.tuner_doubles import ToyModel


def _key(cfg="a", device="H200") -> MeasurementKey:
    return MeasurementKey(
        "sm90", device, "nvcc 13.0", "cutlass 4.2.0", "t1", "gemm", "bf16", "rr", '{"K":8,"M":8,"N":8}', cfg
    )


def test_store_roundtrip_lookup_and_replay(tmp_path):
    s = ResultsStore(tmp_path / "r.sqlite")
    s.record(
        Measurement(
            key=_key(), status="ok", time_ms=1.5, tflops=3.0, runtime={"raster": "M"}, result={"x": 1}
        )
    )
    s.record(Measurement(key=_key("b"), status="wrong_result", reason="planted"))
    assert s.lookup(_key()).time_ms == 1.5
    assert s.lookup(_key(device="H100")) is None  # device is part of the key
    r = s.replay_lookup("sm90", "gemm", "bf16", "rr", '{"K":8,"M":8,"N":8}', "a")
    assert r is not None and r.runtime == {"raster": "M"}
    s.close()
    ro = ResultsStore(tmp_path / "r.sqlite", readonly=True)
    assert ro.count() == 2 and ro.lookup(_key("b")).status == "wrong_result"


def test_store_survives_kill_9(tmp_path):
    """A writer killed with SIGKILL after committing N rows leaves exactly N readable rows."""
    code = textwrap.dedent(f"""
        import os, signal
        from kernelpilot.tile_tuner.store import ResultsStore, Measurement, MeasurementKey
        s = ResultsStore({str(tmp_path / "k.sqlite")!r})
        for i in range(5):
            s.record(Measurement(key=MeasurementKey('t','d','c','l','v','gemm','bf16','rr','p',str(i)), status='ok', time_ms=float(i)))
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    r = subprocess.run([sys.executable, "-c", code])
    assert r.returncode == -9
    assert (
        sqlite3.connect(tmp_path / "k.sqlite").execute("select count(*) from measurements").fetchone()[0] == 5
    )


def test_space_filter_and_errors():
    cfgs = list(ToyModel().enumerate("gemm", "bf16"))
    axes = ToyModel().search_axes("gemm")
    assert all(matches_filter(c, {"tile_m": [64]}, axes) == (c.tile[0] == 64) for c in cfgs)
    with pytest.raises(InputError, match="colour"):
        matches_filter(cfgs[0], {"colour": ["red"]})


def _space():
    return SearchSpace(ToyModel(), "gemm", "bf16", {"M": 1000, "N": 1000, "K": 8, "dtype": "bf16"})


@pytest.mark.parametrize("name", ["exhaustive", "random", "model", "bayes"])
def test_proposers_never_repeat_and_only_propose_legal_configs(name):
    space = _space()
    p = make_proposer(name, space, seed=3)
    h = History()
    seen = []
    while True:
        batch = p.propose(5, h)
        if not batch:
            break
        for cfg in batch:
            assert ToyModel().check(cfg).valid
            seen.append(config_key(cfg))
            h.observations.append(Observation(config_key(cfg), cfg, float(len(seen)), "ok"))
    assert len(seen) == len(set(seen)) == len(space)


def test_model_proposer_refines_around_the_best_measured():
    space = _space()
    p = make_proposer("model", space)
    h = History()
    first = p.propose(2, h)
    for cfg in first:
        h.observations.append(Observation(config_key(cfg), cfg, 1.0, "ok"))
    best = first[0]
    nxt = p.propose(4, h)
    neighbours = {config_key(c) for c in space.neighbours(best)}
    assert any(config_key(c) in neighbours for c in nxt)


def test_bayes_learns_from_measured_configs_only():
    space = _space()
    p = make_proposer("bayes", space, seed=0, startup=2)
    h = History()
    for _ in range(4):
        for cfg in p.propose(3, h):
            h.observations.append(Observation(config_key(cfg), cfg, 1.0 + cfg.tile[0] / 128, "ok"))
    assert len(p._study.trials) >= 12  # noqa: SLF001 - told trials + asked (failed) trials


def test_parse_dims():
    assert parse_dims("M=8,N=16,K=32,causal=true") == {"M": 8, "N": 16, "K": 32, "causal": True}
    with pytest.raises(InputError):
        parse_dims("M8")


def test_native_batch_defaults_overrides_and_cli_wins(tmp_path):
    f = tmp_path / "b.yaml"
    f.write_text(
        "target: sm90\ndefaults: {dtype: bf16, proposer: random, budget_configs: 5}\n"
        "workloads:\n  - {name: a, dims: {M: 8, N: 8, K: 8}}\n  - {name: b, dims: {M: 8, N: 8, K: 8}, proposer: bayes}\n"
    )
    target, wls, _ = load_batch(f)
    assert (
        target == "sm90" and [w.proposer for w in wls] == ["random", "bayes"] and wls[0].budget_configs == 5
    )
    target, wls, _ = load_batch(f, {"proposer": "model"}, "pvc")
    assert target == "pvc" and [w.proposer for w in wls] == ["model", "model"]


def test_xeforge_modes(tmp_path):
    f = tmp_path / "x.yaml"
    f.write_text(
        "mode: fa2\nfa_mode: decode\ncausal: true\ntune-xpu:\n  - {name: d, dims: {head_dim: 128, seq_qo: 1}}\n"
    )
    target, [w], extras = load_batch(f)
    assert (target, w.kernel, w.dims["causal"], extras["format"]) == ("bmg", "fa_decode", True, "xe-forge")
    f.write_text("mode: moe\ntune-xpu:\n  - {name: m, dims: {N: 8, K: 8, num_experts: 2, total_tokens: 4}}\n")
    assert load_batch(f)[1][0].kernel == "moe_gemm"
    f.write_text("mode: natten\ntune-xpu:\n  - {name: m, dims: {}}\n")
    with pytest.raises(InputError, match="unknown mode 'natten'") as e:
        load_batch(f)
    assert "x.yaml" in str(e.value)
    f.write_text("mode: gemm\ntune-xpu:\n  - {name: m, dims: {M: 1}, extra: 3}\n")
    with pytest.raises(InputError, match=r"workload 'm'.*unknown key"):
        load_batch(f)


def test_report_re_renders_from_run_json(tmp_path):
    from tests.support import run_cli

    doc = {
        "target": "bmg",
        "device": None,
        "workloads": [
            {
                "name": "g", "kernel": "gemm", "dtype": "bf16", "dims": {"M": 8, "N": 8, "K": 8}, "flops": 1024.0,
                "min_bytes": 384.0, "peak_tflops": 100.0, "best_trace_ms": [2.0, 1.0],
                "best": {"config": {"wg": [256, 256, 32], "sg": [8, 4, 1]}, "label": "x", "runtime": {}, "time_ms": 1.0,
                         "tflops": 0.001, "pct_of_peak": 0.001},
                "speedup_vs_default": 2.0, "measured_configs": 2, "stop_reason": "budget",
                "model_disagreements": [{"label": "y", "config": {}, "status": "build_failed", "reason": "static_assert"}],
                "tried": [],
            }
        ],
    }  # fmt: skip
    p = tmp_path / "run.json"
    p.write_text(json.dumps(doc))
    r = run_cli("report", str(p), "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    assert "MODEL DISAGREEMENT" in r.stdout
    assert json.loads((tmp_path / "o" / "tile_shapes.json").read_text()) == [
        {"wg": [256, 256, 32], "sg": [8, 4, 1]}
    ]
    assert (tmp_path / "o" / "convergence.png").stat().st_size > 0 and (
        tmp_path / "o" / "roofline.png"
    ).exists()
    assert run_cli("report", str(tmp_path / "missing.json")).returncode == 2


class _FakeClient:
    """Stands in for kernelpilot.llm.LLMClient: returns canned replies, records the prompts."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.prompts = []

    def chat(self, messages):
        self.prompts.append(messages[-1]["content"])
        return self.replies.pop(0)


def test_llm_proposer_parses_checks_and_feeds_back_invalid_proposals():
    space = _space()
    reply = json.dumps(
        {"configs": [{"tile": [64, 64], "schedule": "b"}, {"tile": [128, 128], "schedule": "a"}]}
    )
    client = _FakeClient([reply, json.dumps({"configs": []})])
    p = make_proposer("llm", space, client=client)
    h = History()
    got = p.propose(4, h)
    assert [c.label() for c in got] == ["64x64_b"]
    assert h.invalid and "toy.tile_area" in h.invalid[0]["violations"][0]
    p.propose(4, h)
    assert "toy.tile_area" in client.prompts[1]  # the violation is fed back
    assert "64x64_b" not in client.prompts[0] and "legal configs" in client.prompts[0]


def test_hybrid_falls_back_to_the_model_when_the_llm_reply_is_garbage():
    space = _space()
    p = make_proposer("hybrid", space, client=_FakeClient(["I think 64x64 is nice"]))
    h = History()
    got = p.propose(3, h)
    assert len(got) == 3 and h.invalid[0]["violations"] == ["reply is not JSON"]


def test_a_problem_with_no_legal_config_is_an_input_error_naming_its_dims_before_anything_is_written(
    tmp_path, monkeypatch
):
    """A space empty with no filter at all (the model rejects every config of these dims) stops the run
    before the store or the cache exists, naming the workload and its dims."""
    from kernelpilot.targets import get_target_model
    from kernelpilot.tile_tuner.api import run_batch
    from kernelpilot.tile_tuner.workload import TuneOptions, Workload

    model = get_target_model("sm90")
    monkeypatch.setattr(type(model), "enumerate", lambda self, kernel, dtype, problem: iter(()))
    w = Workload(name="w", kernel="gemm", dtype="bf16", dims={"M": 64, "N": 64, "K": 64}, target="sm90",
                 source="b.yaml: workload 'w' (workloads[0])")  # fmt: skip
    opts = TuneOptions(out_dir=tmp_path / "o", store_path=tmp_path / "s.sqlite", cache_dir=tmp_path / "c")
    with pytest.raises(InputError) as err:
        run_batch("sm90", [w], opts)
    assert err.value.field == "dims"
    assert "workload 'w'" in str(err.value) and "no legal gemm config" in str(err.value)
    assert "'M': 64" in str(err.value)
    assert not (tmp_path / "s.sqlite").exists() and not (tmp_path / "c").exists()
