"""`kernelpilot check-tiles` and `kernelpilot space` through a real subprocess (real exit codes and stdout)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.support import REPO, run_cli

DATA = REPO / "tests" / "data" / "hw_models"


def _write(tmp_path: Path, name: str, data: object) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data) if name.endswith(".json") else yaml.safe_dump(data))
    return path


def test_check_tiles_xe_json(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "xe.yaml",
        [
            {"kernel": "gemm", "dtype": "bf16", "wg": [256, 256, 32], "sg": [8, 4, 1]},
            {"kernel": "gemm", "dtype": "bf16", "wg": [256, 200, 32], "sg": [8, 4, 1]},
            {"kernel": "gemm", "dtype": "fp16", "wg": [96, 256, 32]},
            {
                "kernel": "fa_decode",
                "dtype": "bf16",
                "qk": [1, 256, 64],
                "pv": [1, 32, 256],
                "out": [1, 128],
                "sg_qk": [1, 16, 1],
                "persistent": True,
                "causal": True,
            },
        ],
    )
    proc = run_cli("check-tiles", "--target", "bmg", "--input", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [r["index"] for r in out] == [0, 1, 2, 3]
    assert [r["valid"] for r in out] == [True, False, False, False]
    assert out[1]["violations"][0]["rule"] == "xe.gemm.wg_n_divisible"
    assert "WG_N=200" in out[1]["violations"][0]["message"]
    assert out[2]["violations"][0]["rule"] == "xe.gemm.wg_m_divisible"
    assert out[3]["violations"][0]["rule"] == "xe.fa.persistent_causal"
    assert set(out[0]) >= {"index", "valid", "violations", "warnings"}


def test_check_tiles_sm90_json_input_and_human_output(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "sm90.json",
        [
            {"tile": [128, 256, 64], "cluster": [2, 1], "schedule": "cooperative"},
            {"tile": [128, 128, 64], "schedule": "pingpong", "epilogue": "tma_coop"},
        ],
    )
    proc = run_cli("check-tiles", "--target", "sm90", "--input", str(path), "--json")
    out = json.loads(proc.stdout)
    assert [r["valid"] for r in out] == [True, False]
    assert out[1]["violations"][0]["rule"] == "sm90.epilogue_pairing"
    human = run_cli("check-tiles", "--target", "sm90", "--input", str(path))
    assert human.returncode == 0
    assert "sm90.epilogue_pairing" in human.stdout and "1 valid, 1 invalid" in human.stdout
    strict = run_cli("check-tiles", "--target", "sm90", "--input", str(path), "--fail-on-invalid")
    assert strict.returncode == 1


def test_check_tiles_problem_section(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "p.yaml",
        {"problem": {"M": 4096, "N": 4100, "K": 4096}, "configs": [{"tile": [128, 128, 64]}]},
    )
    out = json.loads(run_cli("check-tiles", "--target", "sm90", "--input", str(path), "--json").stdout)
    assert out[0]["violations"][0]["rule"] == "sm90.alignment"


def test_check_tiles_unknown_field_or_kind_exit_2(tmp_path: Path) -> None:
    bad_field = _write(
        tmp_path,
        "f.yaml",
        [{"kernel": "gemm", "wg": [256, 256, 32]}, {"kernel": "gemm", "wg": [8, 16, 16], "tiles": 3}],
    )
    proc = run_cli("check-tiles", "--target", "bmg", "--input", str(bad_field), "--json")
    assert proc.returncode == 2
    assert "tiles" in proc.stderr and "entry 1" in proc.stderr and proc.stdout == ""
    bad_kind = _write(tmp_path, "k.yaml", [{"kernel": "conv2d", "wg": [256, 256, 32]}])
    proc = run_cli("check-tiles", "--target", "pvc", "--input", str(bad_kind))
    assert proc.returncode == 2 and "conv2d" in proc.stderr and "fa_prefill" in proc.stderr
    proc = run_cli("check-tiles", "--target", "gfx942", "--input", str(bad_kind))
    assert proc.returncode == 2 and "sm90" in proc.stderr
    proc = run_cli("check-tiles", "--target", "bmg", "--input", str(tmp_path / "missing.yaml"))
    assert proc.returncode == 2 and "missing.yaml" in proc.stderr


def test_check_tiles_on_library_data_file(tmp_path: Path) -> None:
    """The library test set, fed through the CLI, gives the same verdicts as the YAML expects."""
    cases = yaml.safe_load((DATA / "sm90_library_configs.yaml").read_text())["cases"]
    path = _write(tmp_path, "lib.yaml", [c["config"] for c in cases])
    out = json.loads(run_cli("check-tiles", "--target", "sm90", "--input", str(path), "--json").stdout)
    assert [r["valid"] for r in out] == [c["expect"] == "valid" for c in cases]


def test_space_json_sm90() -> None:
    proc = run_cli(
        "space",
        "--target",
        "sm90",
        "--kernel",
        "gemm",
        "--dtype",
        "bf16",
        "--dims",
        "M=8192,N=8192,K=8192",
        "--top",
        "5",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert 50 <= out["space_size"] <= 120
    assert len(out["top"]) == 5
    times = [row["estimate_s"] for row in out["top"]]
    assert times == sorted(times)
    assert out["default"]["label"] == "128x128x64_c1x1_coop_nosmem"
    assert all(row["tflops"] < 989.4 for row in out["top"])


def test_space_xe_fa_and_no_dims() -> None:
    proc = run_cli(
        "space",
        "--target",
        "bmg",
        "--kernel",
        "fa_prefill",
        "--dtype",
        "bf16",
        "--dims",
        "batch=2,num_heads_q=16,num_heads_kv=4,seq_qo=2048,seq_kv=2048,head_dim=128,causal=1",
        "--json",
    )
    out = json.loads(proc.stdout)
    assert out["space_size"] > 0 and out["top"] and all(r["config"]["causal"] for r in out["top"])
    plain = run_cli("space", "--target", "pvc", "--kernel", "gemm", "--dtype", "s8")
    assert plain.returncode == 0 and "legal configs" in plain.stdout


def test_space_bad_input_exit_2() -> None:
    assert run_cli("space", "--target", "sm90", "--kernel", "conv", "--dtype", "bf16").returncode == 2
    assert run_cli("space", "--target", "sm90", "--kernel", "gemm", "--dtype", "fp9").returncode == 2
    proc = run_cli("space", "--target", "sm90", "--kernel", "gemm", "--dtype", "bf16", "--dims", "M=8x")
    assert proc.returncode == 2 and "M" in proc.stderr
    proc = run_cli("space", "--target", "sm90", "--kernel", "gemm", "--dtype", "tf32", "--layout", "rr")
    assert proc.returncode == 2 and "--dims" in proc.stderr


def test_space_layout_rules_apply() -> None:
    """tf32 needs K-major operands on sm90: a row/row problem has no legal config, row/col has many."""
    rr = run_cli(
        "space",
        "--target",
        "sm90",
        "--kernel",
        "gemm",
        "--dtype",
        "tf32",
        "--layout",
        "rr",
        "--dims",
        "M=4096,N=4096,K=4096",
        "--json",
    )
    rc = run_cli(
        "space",
        "--target",
        "sm90",
        "--kernel",
        "gemm",
        "--dtype",
        "tf32",
        "--layout",
        "rc",
        "--dims",
        "M=4096,N=4096,K=4096",
        "--json",
    )
    assert json.loads(rr.stdout)["space_size"] == 0
    assert json.loads(rc.stdout)["space_size"] > 20


def test_check_tiles_sm90_mixed_widths(tmp_path: Path) -> None:
    """``extra_tile_n`` through the CLI: a legal mixed config passes, a width its kernel cannot hold is an
    invalid result naming the rule and the width, and a malformed field is bad input (exit 2) naming the
    entry and the field."""
    swap = {"kernel": "grouped_gemm", "tile": [256, 176, 64], "schedule": "cooperative", "swap_ab": True}
    path = _write(tmp_path, "mixed.yaml", [{**swap, "extra_tile_n": [160]}, {**swap, "extra_tile_n": [208]}])
    proc = run_cli("check-tiles", "--target", "sm90", "--input", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [r["valid"] for r in out] == [True, False]
    (violation,) = out[1]["violations"]
    assert violation["rule"] == "sm90.extra_tile_n" and "width 208" in violation["message"]
    strict = run_cli("check-tiles", "--target", "sm90", "--input", str(path), "--fail-on-invalid")
    assert strict.returncode == 1
    for bad, needle in (
        ([160, 144, 128], "extra_tile_n must be a list of 0 or 1 or 2"),
        (["wide"], "extra_tile_n[0]"),
    ):
        path = _write(tmp_path, "bad.yaml", [{**swap, "extra_tile_n": bad}])
        proc = run_cli("check-tiles", "--target", "sm90", "--input", str(path))
        assert proc.returncode == 2, proc.stderr
        assert needle in proc.stderr and "bad.yaml: entry 0" in proc.stderr, proc.stderr
