"""The Bayes (TPE) proposer and the space filter read the target's search axes instead of naming a
target's fields: on Xe, TPE sees tile extents as numbers; on sm90 it sees what it always saw."""

from __future__ import annotations

import json

import pytest

from kernelpilot.errors import InputError
from kernelpilot.targets import get_target_model
from kernelpilot.tile_tuner.proposers import History, Observation, make_proposer
from kernelpilot.tile_tuner.proposers.bayes import Dimension
from kernelpilot.tile_tuner.space import SearchSpace, config_key

pytest.importorskip("optuna")

GEMM = {"M": 4096, "N": 4096, "K": 4096, "dtype": "bf16"}
ATTENTION = {"batch": 1, "num_heads_q": 8, "num_heads_kv": 8, "seq_qo": 2048, "seq_kv": 2048, "head_dim": 128,
             "dtype": "bf16"}  # fmt: skip


def _dists(target, kernel, problem, space_filter=None):
    space = SearchSpace(get_target_model(target), kernel, "bf16", problem, None, space_filter)
    return space, make_proposer("bayes", space, seed=0)._dists  # noqa: SLF001 - what optuna is given


def test_tpe_on_an_xe_gemm_sees_numeric_work_group_and_subgroup_extents():
    import optuna

    space, dists = _dists("bmg", "gemm", GEMM)
    assert "wg" not in dists and "sg" not in dists
    for name in ("wg_m", "wg_n", "wg_k", "sg_m", "sg_n"):
        assert isinstance(dists[name], optuna.distributions.IntDistribution), name
    # ordinal: the parameter is the rank among the space's extents, 0 .. number of extents - 1
    wg_m = sorted({c.wg[0] for c in space.configs})
    assert (dists["wg_m"].low, dists["wg_m"].high) == (0, len(wg_m) - 1) and len(wg_m) > 2


def test_tpe_on_xe_flash_attention_sees_numeric_tile_extents():
    import optuna

    _, dists = _dists("bmg", "fa_prefill", ATTENTION)
    assert {"qk_q", "qk_kv", "pv_v", "sg_qk_q"} <= set(dists) and "qk" not in dists
    assert all(isinstance(d, optuna.distributions.IntDistribution) for d in dists.values())


def test_tpe_on_sm90_keeps_categorical_tile_extents():
    import optuna

    _, dists = _dists("sm90", "gemm", GEMM)
    assert {"tile_m", "tile_n", "tile_k", "schedule"} <= set(dists)
    assert all(isinstance(d, optuna.distributions.CategoricalDistribution) for d in dists.values())
    assert dists["tile_m"].choices == ("128", "256", "64")  # sorted labels, as before axes were declared


def test_tpe_sees_swap_ab_where_the_space_mixes_swapped_and_unswapped_configs():
    # as_dict writes swap_ab only when set; read field by field from as_dict alone, the unswapped
    # configs had no value and TPE saw one value ("True"), i.e. no dimension at all
    space, dists = _dists("sm90", "gemm", {"M": 16, "N": 4096, "K": 14336, "dtype": "bf16"})
    assert any(c.swap_ab for c in space.configs) and not all(c.swap_ab for c in space.configs)
    assert dists["swap_ab"].choices == ("False", "True")


def test_a_sampled_point_maps_onto_the_nearest_extent():
    dim = Dimension("ordinal", (32, 64, 128, 256))
    assert dim.encode(128) == 2
    assert dim.distance(dim.encode(128), dim.encode(256)) < dim.distance(dim.encode(32), dim.encode(256))
    assert Dimension("categorical", ("a", "b")).distance("a", "b") == 1.0
    assert Dimension("int", (1, 3)).distance(1, 2) == 0.5


def test_bayes_on_xe_proposes_unmeasured_legal_configs_and_learns_from_them():
    space = SearchSpace(get_target_model("bmg"), "gemm", "bf16", GEMM, None, {"wg_k": [32], "stages": [3]})
    proposer = make_proposer("bayes", space, seed=1, startup=4)
    history = History()
    seen: list[str] = []
    for _ in range(4):
        for cfg in proposer.propose(4, history):
            assert space.check(cfg).valid
            seen.append(config_key(cfg))
            history.observations.append(
                Observation(config_key(cfg), cfg, 1.0 + abs(cfg.wg[0] - 256) / 64, "ok")
            )
    assert len(seen) == len(set(seen)) == 16
    assert len(proposer._study.trials) >= 16  # noqa: SLF001 - told trials + asked (failed) trials


def test_space_filter_addresses_xe_extents_and_names_them_when_a_field_is_unknown():
    bmg = get_target_model("bmg")
    space = SearchSpace(bmg, "gemm", "bf16", GEMM, None, {"wg_m": [256], "sg_n": [4]})
    assert len(space) > 0 and all(c.wg[0] == 256 and c.effective_sg()[1] == 4 for c in space.configs)
    with pytest.raises(
        InputError, match=r"'tile_m' is not a config field; allowed: wg_m, wg_n, wg_k, sg_m"
    ) as err:
        SearchSpace(bmg, "gemm", "bf16", GEMM, None, {"tile_m": [256]})
    assert err.value.field == "space.tile_m"
    # whole fields still filter as before
    whole = SearchSpace(bmg, "gemm", "bf16", GEMM, None, {"wg": [[256, 256, 32]]})
    assert {json.dumps(c.as_dict()["wg"]) for c in whole.configs} == {"[256, 256, 32]"}
