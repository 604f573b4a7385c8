"""Spec YAML: parsing, variant resolution, safe formulas, and errors that name file/variant/field."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kernelpilot.errors import InputError
from kernelpilot.spec import evaluate_formula, load_spec, parse_spec

XEFORGE_STYLE = """
inputs:
  X:
    shape: [BATCH, INPUT_SIZE]
    dtype: float32
inits:
  - dim: INPUT_SIZE
  - dim: HIDDEN_SIZE
  - dim: SCALING_FACTOR
ci:
  - params: [X]
    dtype: float16
    dims: {BATCH: 4, INPUT_SIZE: 1024, HIDDEN_SIZE: 2048, SCALING_FACTOR: 1.5}
    flop: "2*BATCH*HIDDEN_SIZE*INPUT_SIZE"
bench-gpu:
  - params: [X]
    dtype: float16
    dims: {BATCH: 1024, INPUT_SIZE: 8192, HIDDEN_SIZE: 8192, SCALING_FACTOR: 1.5}
    flop: "2*BATCH*HIDDEN_SIZE*INPUT_SIZE"
  - params: [X]
    dims: {BATCH: 8, INPUT_SIZE: 64, HIDDEN_SIZE: 32, SCALING_FACTOR: 2.0}
    flop: 100
    rtol: 0.05
"""


def write(tmp_path: Path, text: str, name: str = "k.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_xeforge_format_resolves(tmp_path):
    spec = load_spec(write(tmp_path, XEFORGE_STYLE))
    ci = spec.resolve("ci")
    assert ci.inputs[0].shape == (4, 1024)
    assert ci.inputs[0].dtype == "float16"  # variant dtype overrides float inputs
    assert ci.init_args == (1024, 2048, 1.5)
    assert ci.flop == 2 * 4 * 2048 * 1024
    # default: bench-gpu, entry 0; entry 1 reachable with '#1'
    assert spec.default_variant_name() == "bench-gpu"
    assert spec.resolve().dims["BATCH"] == 1024
    second = spec.resolve("bench-gpu#1")
    assert second.inputs[0].dtype == "float32" and second.rtol == 0.05 and second.flop == 100.0
    assert spec.tolerance_settings("bench-gpu#1") == {"correctness_rtol": 0.05}
    assert spec.tolerance_settings("ci") == {}


def test_formula_is_ast_not_string_replacement():
    # Xe-Forge replaced 'N' inside 'NUM_HEADS'; the AST walker cannot.
    dims = {"N": 3, "NUM_HEADS": 5, "K": 2, "KH": 7}
    assert evaluate_formula("N*NUM_HEADS + K*KH", dims) == 3 * 5 + 2 * 7
    assert evaluate_formula("cdiv(N, 2) * max(K, KH) ** 2", dims) == 2 * 49
    assert evaluate_formula(12, dims) == 12.0


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os').system('true')",
        "N.real",
        "[N][0]",
        "unknown * 2",
        "N if N else K",
        "2 ** 1000",
        "N / 0",
    ],
)
def test_formula_rejects_unsafe_or_unknown(expr):
    with pytest.raises(ValueError):
        evaluate_formula(expr, {"N": 3, "K": 2})


def test_bad_formula_error_names_file_variant_field(tmp_path):
    text = XEFORGE_STYLE.replace(
        'flop: "2*BATCH*HIDDEN_SIZE*INPUT_SIZE"\nbench-gpu', 'flop: "2*BATCH*HIDDN"\nbench-gpu'
    )
    path = write(tmp_path, text)
    with pytest.raises(InputError) as err:
        load_spec(path)
    msg = str(err.value)
    assert str(path) in msg and "ci.flop" in msg and "HIDDN" in msg


def test_unknown_variant_lists_known(tmp_path):
    spec = load_spec(write(tmp_path, XEFORGE_STYLE))
    with pytest.raises(InputError, match="bench-gpu") as err:
        spec.resolve("bench-xpu")
    assert "field variant" in str(err.value)
    with pytest.raises(InputError, match="out of range"):
        spec.resolve("bench-gpu#5")


def test_shape_dim_missing_in_variant(tmp_path):
    text = XEFORGE_STYLE.replace("dims: {BATCH: 4, INPUT_SIZE: 1024,", "dims: {INPUT_SIZE: 1024,")
    with pytest.raises(InputError) as err:
        load_spec(write(tmp_path, text))
    assert "inputs.X.shape[0]" in str(err.value) and "variant ci" in str(err.value)


def test_unknown_entry_field_lists_allowed(tmp_path):
    text = XEFORGE_STYLE.replace("    flop: 100\n", "    flops: 100\n")
    with pytest.raises(InputError) as err:
        load_spec(write(tmp_path, text))
    assert "bench-gpu[1].flops" in str(err.value) and "allowed fields" in str(err.value)


def test_bad_dtype_and_scalar_key(tmp_path):
    with pytest.raises(InputError, match="inputs.X.dtype"):
        load_spec(write(tmp_path, XEFORGE_STYLE.replace("dtype: float32", "dtype: float33")))
    with pytest.raises(InputError, match="neither a variant"):
        load_spec(write(tmp_path, XEFORGE_STYLE + "\nbench_typo: 3\n"))


def test_integer_inputs_with_ranges_from_dims():
    spec = parse_spec(
        {
            "inputs": {
                "A": {"shape": ["M", "K"], "dtype": "bf16"},
                "topk_ids": {"shape": ["M", "TOPK"], "dtype": "int32", "range": [0, "E"]},
            },
            "inits": [{"dim": "E"}],
            "ci": [
                {
                    "params": ["A", "topk_ids"],
                    "dtype": "bfloat16",
                    "dims": {"M": 5, "K": 8, "TOPK": 2, "E": 16},
                }
            ],
            "lowering": {"family": "fused_moe"},  # another tool's section: kept aside, not a variant
        },
        path="moe.yaml",
    )
    v = spec.resolve("ci")
    assert v.inputs[1].dtype == "int32" and v.inputs[1].range == (0, 16)
    assert v.inputs[0].dtype == "bfloat16"
    assert spec.extra == {"lowering": {"family": "fused_moe"}}
    with pytest.raises(InputError, match="range is only for integer"):
        parse_spec(
            {"inputs": {"A": {"shape": [2], "dtype": "float32", "range": [0, 1]}}, "ci": [{"dims": {}}]}
        )


def test_init_referencing_unknown_dim(tmp_path):
    text = XEFORGE_STYLE.replace("  - dim: SCALING_FACTOR\n", "  - dim: SCALE\n")
    with pytest.raises(InputError) as err:
        load_spec(write(tmp_path, text))
    assert "inits[2]" in str(err.value) and "SCALE" in str(err.value)


def test_default_variant_must_exist(tmp_path):
    with pytest.raises(InputError, match="default_variant"):
        load_spec(write(tmp_path, XEFORGE_STYLE + "\ndefault_variant: nope\n"))
    spec = load_spec(write(tmp_path, XEFORGE_STYLE + "\ndefault_variant: ci\n"))
    assert spec.resolve().name == "ci"


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_spec(tmp_path / "absent.yaml")
    with pytest.raises(InputError, match="not valid YAML"):
        load_spec(write(tmp_path, "inputs: [unclosed\n"))
