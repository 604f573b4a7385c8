"""`kernelpilot tune` / `report` from the command line: dry runs, input errors (exit 2, nothing written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import run_cli


def _write(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.write_text(text)
    return p


GOOD = """
target: sm90
defaults: {kernel: gemm, dtype: bf16, layout: rr, budget_configs: 4}
workloads:
  - name: big
    dims: {M: 4096, N: 4096, K: 4096}
  - name: skinny
    dims: {M: 64, N: 28672, K: 4096}
    proposer: exhaustive
    space: {tile_k: [64], cluster: [[1, 1]], schedule: [pingpong]}
"""


def test_dry_run_renders_programs_and_cmake_without_gpu_or_compiler(tmp_path):
    f = _write(tmp_path, "b.yaml", GOOD)
    out = tmp_path / "out"
    r = run_cli(
        "tune", str(f), "--dry-run", "--out", str(out), env={"PATH": "/usr/bin:/bin", "CUTLASS_DIR": ""}
    )
    assert r.returncode == 0, r.stderr
    plan = json.loads((out / "plan.json").read_text())
    names = [w["name"] for w in plan["workloads"]]
    assert names == ["big", "skinny"]
    big, skinny = plan["workloads"]
    assert len(big["planned"]) == 4 and big["planned"][0]["is_default"]
    assert all(p["valid"] for p in big["planned"][1:])
    # exhaustive over the filtered space: default + every pingpong 64-deep 1x1 config, capped by the budget
    assert all(p["config"]["schedule"] == "pingpong" for p in skinny["planned"][1:])
    project = Path(plan["projects"][0]["project"])
    cm = (project / "CMakeLists.txt").read_text()
    assert "arch=compute_90a,code=sm_90a" in cm and "--expt-relaxed-constexpr" in cm
    targets = {p["cmake_target"] for w in plan["workloads"] for p in w["planned"]}
    for t in targets:
        src = (project / t / "gemm.cu").read_text()
        assert f"add_executable({t} " in cm
        assert "CollectiveBuilder" in src and "KernelTmaWarpSpecialized" in src
    assert "ninja -C" in (project / "BUILD.txt").read_text()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (GOOD.replace("dims: {M: 4096, N: 4096, K: 4096}", "dims: {M: 4096, N: 4096}"), "workload 'big'"),
        (GOOD.replace("budget_configs: 4", "budget_configs: 4, colour: red"), "colour"),
        (GOOD.replace("proposer: exhaustive", "proposer: genius"), "skinny"),
        (GOOD.replace("K: 4096}\n  - name: skinny", "K: 4100}\n  - name: skinny"), "K=4100"),
        ("mode: attention\ntune-xpu: [{name: a, dims: {M: 1}}]\n", "unknown mode"),
        ("target: sm90\nworkloads: []\n", "workloads"),
        ("- just a list\n", "mapping"),
        # a space filter that keeps no legal config: named with the values the workload can take
        (GOOD.replace("schedule: [pingpong]", "schedule: [pingping]"), '"cooperative", "pingpong"'),
        (GOOD.replace("schedule: [pingpong]", "streams: [2]"), "streams: [2] (legal here: 1)"),
        (GOOD.replace("schedule: [pingpong]", "colour: [red]"), "'colour' is not a config field"),
    ],
)
def test_bad_input_exits_2_names_file_workload_field_and_writes_nothing(tmp_path, text, needle):
    f = _write(tmp_path, "bad.yaml", text)
    out = tmp_path / "out"
    r = run_cli("tune", str(f), "--dry-run", "--out", str(out))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "bad.yaml" in r.stderr and needle in r.stderr
    assert not out.exists()


@pytest.mark.parametrize("real_run", [False, True])
@pytest.mark.parametrize(
    "source",
    [("--kernel", "gemm", "--target", "sm90", "--dims", "M=64,N=28672,K=4096"), ("FILE",)],
)
def test_space_filter_flag_that_keeps_nothing_names_the_flag_and_the_workload(tmp_path, source, real_run):
    """--space-filter overrides the file's space: a filter no config meets is reported under the flag (not
    the workload's ``space:``), with the workload and the values its legal space holds."""
    args = [str(_write(tmp_path, "b.yaml", GOOD)) if a == "FILE" else a for a in source]
    out = tmp_path / "out"
    flags = [] if real_run else ["--dry-run"]
    extra = ["--cache-dir", str(tmp_path / "c"), "--store", str(tmp_path / "s.sqlite")] if real_run else []
    r = run_cli("tune", *args, "--space-filter", '{"streams": [3]}', *flags, "--out", str(out), *extra)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "--space-filter" in r.stderr and ".space" not in r.stderr
    assert "streams: [3] (legal here: 1)" in r.stderr
    assert ("workload 'big'" if source == ("FILE",) else "--dims M=64,N=28672,K=4096") in r.stderr
    assert not out.exists() and not (tmp_path / "s.sqlite").exists()


def test_missing_file_and_cli_errors(tmp_path):
    r = run_cli("tune", str(tmp_path / "nope.yaml"), "--dry-run", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "nope.yaml" in r.stderr
    r = run_cli(
        "tune", "--kernel", "gemm", "--dims", "M=1,N=8,K=8", "--dry-run", "--out", str(tmp_path / "o")
    )
    assert r.returncode == 2 and "--target" in r.stderr
    r = run_cli(
        "tune",
        "--target",
        "sm90",
        "--kernel",
        "gemm",
        "--dims",
        "M=1,N=8",
        "--dry-run",
        "--out",
        str(tmp_path / "o"),
    )
    assert r.returncode == 2 and "K" in r.stderr


def test_xeforge_format_is_accepted_for_gemm(tmp_path):
    f = _write(
        tmp_path,
        "xf.yaml",
        "mode: gemm\ndtype: bf16\nmax_rounds: 1\noutput: res.json\ntune-xpu:\n  - name: g1\n    dims: {M: 1024, N: 1024, K: 1024}\n",
    )
    r = run_cli("tune", str(f), "--target", "sm90", "--dry-run", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    plan = json.loads((tmp_path / "o" / "plan.json").read_text())
    assert plan["workloads"][0]["name"] == "g1"
    assert len(plan["workloads"][0]["planned"]) == 6  # 1 + 5 * max_rounds


def test_real_run_without_gpu_stops_before_building(tmp_path):
    f = _write(tmp_path, "b.yaml", GOOD)
    r = run_cli("tune", str(f), "--out", str(tmp_path / "o"), "--cache-dir", str(tmp_path / "c"), "--store", str(tmp_path / "s.sqlite"),
                env={"PATH": "/usr/bin:/bin"})  # fmt: skip
    assert r.returncode == 1
    assert "nvcc" in r.stderr or "GPU" in r.stderr or "CUTLASS" in r.stderr
    assert not (tmp_path / "c").exists() or not list((tmp_path / "c").iterdir())


def test_bad_input_in_a_real_run_writes_no_store_or_cache(tmp_path):
    f = _write(tmp_path, "bad.yaml", GOOD.replace("K: 4096}\n  - name: skinny", "K: 4100}\n  - name: skinny"))
    r = run_cli(
        "tune",
        str(f),
        "--out",
        str(tmp_path / "o"),
        "--cache-dir",
        str(tmp_path / "c"),
        "--store",
        str(tmp_path / "s.sqlite"),
    )
    assert r.returncode == 2 and "K=4100" in r.stderr
    assert (
        not (tmp_path / "s.sqlite").exists()
        and not (tmp_path / "c").exists()
        and not (tmp_path / "o").exists()
    )
