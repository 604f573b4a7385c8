"""A workload whose problem has no library default is tuned, and the run JSON names its baseline.

Phi-2 attention (head_dim 80): sycl-tla's examples build no config for it; the engine takes the model's
best legal config as the baseline and says so, instead of stopping the batch (the replay backend: nothing
is built or run)."""

from __future__ import annotations

from pathlib import Path

from kernelpilot.dsl_plugins.sycl.kernels import all_kernels
from kernelpilot.hw_models.catalogue import get_device
from kernelpilot.targets import get_target_model
from kernelpilot.tile_tuner.engine import TuneEngine
from kernelpilot.tile_tuner.space import config_key
from kernelpilot.tile_tuner.summary import summarize_state
from kernelpilot.tile_tuner.workload import TuneOptions, Workload
from tests.support import REPO

STORE = REPO / "tests" / "data" / "replay" / "h200_gemm_bf16.sqlite"
FA = {k.kind: k for k in all_kernels()}["fa_prefill"]


def _summary(tmp_path: Path, head_dim: int) -> tuple[dict, object]:
    opts = TuneOptions(
        out_dir=tmp_path, store_path=tmp_path / "s.sqlite", cache_dir=tmp_path / "c", replay=STORE
    )
    device = get_device("arc_b580")
    engine = TuneEngine(get_target_model("bmg"), FA, "bmg", opts, None, device=device)
    dims = {
        "head_dim": head_dim,
        "batch": 1,
        "num_heads_q": 32,
        "seq_qo": 2048,
        "seq_kv": 2048,
        "causal": True,
    }
    wl = Workload(name="w", kernel="fa_prefill", dtype="bf16", dims=dims, target="bmg", proposer="model")
    state = engine.make_state(wl)
    return summarize_state(state, "bmg", device, FA), state


def test_head_dim_80_is_tuned_from_the_models_best_config(tmp_path: Path) -> None:
    doc, state = _summary(tmp_path, 80)
    assert doc["baseline"]["source"] == "model_best"
    assert "no library default fa_prefill config for head_dim=80" in doc["baseline"]["note"]
    assert state.default_key == config_key(state.space.ranked()[0])


def test_a_library_default_is_named_as_such(tmp_path: Path) -> None:
    doc, _ = _summary(tmp_path, 128)
    assert doc["baseline"] == {"source": "library", "note": ""}
