"""Every library default a target model hands the tuner is legal under the same model, and a dtype the
kernel does not take at all is an input error, not an unbuildable "default"."""

from __future__ import annotations

import pytest

from kernelpilot.errors import InputError
from kernelpilot.targets import get_target_model

DTYPES = ["bf16", "f16", "tf32", "s8", "u8", "s4", "u4", "e4m3", "e5m2", "e2m1", {"a": "bf16", "b": "u4"}]


@pytest.mark.parametrize("target", ["bmg", "pvc", "sm90"])
def test_defaults_are_legal_or_rejected_as_input(target: str) -> None:
    model = get_target_model(target)
    accepted = 0
    for kernel in model.kernels:
        for dtype in DTYPES:
            try:
                config = model.default_config(kernel, dtype)
            except InputError as exc:
                assert exc.field == "dtype" and kernel in str(exc)
                continue
            result = model.check(config)
            assert result.valid, (kernel, dtype, [v.rule for v in result.violations])
            accepted += 1
    assert accepted >= len(model.kernels)  # at least bf16 for every kind


def test_sub_byte_grouped_default_holds_a_dpas_k_step() -> None:
    config = get_target_model("bmg").default_config("grouped_gemm", "s4")
    assert config.as_dict()["wg"][2] == 64


def test_unsupported_attention_dtype_is_input_error() -> None:
    with pytest.raises(InputError, match="flash attention takes"):
        get_target_model("bmg").default_config("fa_prefill", "s8")
