"""Search axes: each target declares how its configs look to the search (split tiles, kinds), and every
declared axis names a real field of that kernel's configs with values of its kind."""

from __future__ import annotations

import pytest

from kernelpilot.hw_models.axes import SearchAxis, axis_values, config_fields
from kernelpilot.targets import get_target_model

GEMM = {"M": 4096, "N": 4096, "K": 4096, "dtype": "bf16"}
ATTENTION = {"batch": 1, "num_heads_q": 8, "num_heads_kv": 8, "seq_qo": 2048, "seq_kv": 2048, "head_dim": 128}
CASES = [("sm90", "gemm", GEMM), ("sm90", "fa_prefill", ATTENTION), ("bmg", "gemm", GEMM),
         ("bmg", "fa_prefill", ATTENTION), ("pvc", "fa_decode", {**ATTENTION, "seq_qo": 1})]  # fmt: skip


@pytest.mark.parametrize(("target", "kernel", "problem"), CASES)
def test_declared_axes_name_real_fields_with_values_of_their_kind(target, kernel, problem):
    model = get_target_model(target)
    axes = model.search_axes(kernel)
    assert axes, f"{target} {kernel} declares no search axes"
    configs = list(model.enumerate(kernel, "bf16", problem))
    assert configs
    for cfg in configs:
        fields = config_fields(cfg)
        values = axis_values(cfg, axes)
        for axis in axes:
            assert axis.field in fields, f"{target}: axis {axis.field!r} is not a field of {cfg.label()}"
            if axis.parts:
                assert len(fields[axis.field]) <= len(axis.parts)
            for name in axis.names()[: len(fields[axis.field]) if axis.parts else 1]:
                kind, value = values[name]
                assert kind == axis.kind
                if kind != "categorical":
                    assert isinstance(value, int) and not isinstance(value, bool), (name, value)


def test_xe_tiles_split_into_ordinal_extents_and_sm90_tiles_stay_categorical():
    bmg = get_target_model("bmg")
    cfg = bmg.parse_config({"kernel": "gemm", "dtype": "bf16", "wg": [256, 128, 32], "stages": 3})
    values = axis_values(cfg, bmg.search_axes("gemm"))
    assert [values[n] for n in ("wg_m", "wg_n", "wg_k")] == [
        ("ordinal", 256),
        ("ordinal", 128),
        ("ordinal", 32),
    ]
    assert values["schedule"] == ("categorical", "default") and "wg" not in values
    sm90 = get_target_model("sm90")
    cfg = sm90.parse_config({"tile": [128, 256, 64]})
    values = axis_values(cfg, sm90.search_axes("gemm"))
    assert [values[n] for n in ("tile_m", "tile_n", "tile_k")] == [
        ("categorical", 128), ("categorical", 256), ("categorical", 64)]  # fmt: skip
    # a field as_dict leaves out at its default is still a value of the config (sm90 swap_ab)
    assert "swap_ab" not in cfg.as_dict() and values["swap_ab"] == ("categorical", False)


def test_an_axis_kind_outside_the_three_is_refused():
    with pytest.raises(ValueError, match="allowed: categorical, ordinal, int"):
        SearchAxis("tile", "float")  # type: ignore[arg-type]
