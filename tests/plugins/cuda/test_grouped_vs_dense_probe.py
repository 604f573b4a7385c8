"""benchmarks/grouped_vs_dense_probe.py's GPU side, run against stand-in programs (scripts printing the
programs' JSON line) and a stand-in cuBLAS timer: which problem each program gets, alternating order,
medians and the ratios that split the gap; a program that fails its checks is recorded and fails the run."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from tests.support.benchmark_scripts import load_benchmark_script

ROOT = Path(__file__).resolve().parents[3]


def _probe():
    return load_benchmark_script("grouped_vs_dense_probe")


def _program(path: Path, log: Path, rule: str, passed: bool = True) -> None:
    """A stand-in that logs its arguments and prints a result line whose time ``rule`` computes from them
    (``groups``: how many groups it was given)."""
    path.write_text(
        f"#!{sys.executable}\n"
        "import json, pathlib, sys\n"
        f"pathlib.Path({str(log)!r}).open('a').write(' '.join([{path.name!r}, *sys.argv[1:]]) + '\\n')\n"
        "arg = next((a for a in sys.argv[1:] if a.startswith('--groups=')), '--groups=x')\n"
        "groups = len(arg.split('=', 1)[1].split(','))\n"
        f"t = {rule}\n"
        "print(json.dumps({'status': 'ok', 'kernel': 'k', 'config': {}, 'problem': {}, 'runtime': {'raster': 'M'},"
        f" 'verification': {{'passed': {passed!r}}}, 'time_ms': {{'median': t, 'min': t, 'max': t, 'repetitions': 5}}}}))\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _folder(tmp_path: Path, probe, dense_passes: bool = True) -> Path:
    folder = tmp_path / "built"
    folder.mkdir()
    log = tmp_path / "calls.log"
    _program(folder / "grouped", log, "2.0 if groups > 1 else 1.8")
    _program(folder / "dense_rc", log, "1.5", passed=dense_passes)
    manifest = {"nvcc": "nvcc 13", "cutlass": "cutlass 4.2.0", "layout": "rc", "grouped_config": probe.GROUPED_CONFIG,
                "dense_config": probe.DENSE_CONFIG, "workloads": [["grouped_gemm", "llama3_8b_mlp_up_varlen8"]]}  # fmt: skip
    (folder / probe.MANIFEST).write_text(json.dumps(manifest))
    return folder


def test_each_path_gets_its_problem_and_the_ratios_split_the_gap(tmp_path, monkeypatch) -> None:
    probe = _probe()
    monkeypatch.setattr(probe, "torch_side", lambda groups, layout: 1.9 if len(groups) > 1 else 1.6)
    monkeypatch.setattr(probe, "torch_version", lambda: "2.x")
    folder = _folder(tmp_path, probe)
    out = tmp_path / "record.json"
    assert probe.run(folder, 2, out) == 0
    calls = (tmp_path / "calls.log").read_text().splitlines()
    # round 1 grouped(groups), grouped(one), dense; round 2 reversed
    assert [c.split()[0] for c in calls] == [
        "grouped",
        "grouped",
        "dense_rc",
        "dense_rc",
        "grouped",
        "grouped",
    ]
    problem = probe.problems()["grouped_gemm"]["llama3_8b_mlp_up_varlen8"]
    m, n, k = probe.one_group(problem)
    assert m == sum(g[0] for g in problem["groups"]) and (n, k) == (14336, 4096)
    assert f"--groups={m}x{n}x{k}" in calls[1] and calls[1].count("x") == 2
    assert calls[0].count(",") >= len(problem["groups"]) - 1
    assert f"--m={m}" in calls[2] and f"--n={n}" in calls[2] and f"--k={k}" in calls[2]
    row = json.loads(out.read_text())["rows"][0]
    assert row["median_ms"] == {
        "grouped_groups": 2.0,
        "grouped_one": 1.8,
        "dense_one": 1.5,
        "torch_groups": 1.9,
        "torch_one": 1.6,
    }
    ratios = row["ratios"]
    assert ratios["grouped_one / dense_one (ptr-array cost per tile)"] == 1.8 / 1.5
    assert ratios["grouped_groups / grouped_one (group boundaries, CUTLASS)"] == 2.0 / 1.8
    assert ratios["grouped_groups / torch_groups (the tuner's yardstick)"] == 2.0 / 1.9
    flop = 2.0 * sum(g[0] * g[1] * g[2] for g in problem["groups"])
    assert abs(row["tflops"]["dense_one"] - flop / 1.5e9) < 1e-6


def test_a_program_failing_its_checks_is_recorded_and_fails_the_run(tmp_path, monkeypatch) -> None:
    probe = _probe()
    monkeypatch.setattr(probe, "torch_side", lambda groups, layout: 1.0)
    monkeypatch.setattr(probe, "torch_version", lambda: "2.x")
    folder = _folder(tmp_path, probe, dense_passes=False)
    out = tmp_path / "record.json"
    assert probe.run(folder, 1, out) == 1
    row = json.loads(out.read_text())["rows"][0]
    assert "dense_one" not in row["median_ms"] and "ratios" not in row
    assert row["best_variant_or_failure"]["dense_one"].startswith("status=ok verification=False")


def test_run_without_a_built_folder_exits_2(tmp_path, capsys) -> None:
    probe = _probe()
    out = tmp_path / "out.json"
    assert probe.main(["run", "--dir", str(tmp_path / "nothing"), "--out", str(out)]) == 2
    assert "build mode first" in capsys.readouterr().err and not out.exists()


def test_per_variant_runs_each_variant_of_the_one_group_programs_alone(tmp_path, monkeypatch) -> None:
    probe = _probe()
    torch_calls: list[int] = []
    monkeypatch.setattr(probe, "torch_side", lambda groups, layout: torch_calls.append(len(groups)) or 1.6)
    monkeypatch.setattr(probe, "torch_version", lambda: "2.x")
    folder = _folder(tmp_path, probe)
    out = tmp_path / "record.json"
    assert probe.run(folder, 1, out, per_variant=True) == 0
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert len(calls) == len(probe.GROUPED_VARIANTS) + len(probe.DENSE_VARIANTS)
    # one variant per run, each its own; no run over the workload's groups, no torch.mm loop
    for call in calls:
        assert (
            sum(a.startswith("--variants=") for a in call.split()) == 1
            and "," not in call.split("--variants=")[1]
        )
        assert call.count("x") <= 2 or call.startswith("dense_rc")
    assert {c.split("--variants=")[1].split()[0] for c in calls if c.startswith("grouped")} == {
        "M:1", "N:1", "M:8", "N:8"
    }  # fmt: skip
    assert torch_calls == [1]
    row = json.loads(out.read_text())["rows"][0]
    assert row["median_ms"]["grouped_one[N:8]"] == 1.8 and row["median_ms"]["dense_one[M:1]"] == 1.5
    assert "torch_groups" not in row["median_ms"] and "ratios" not in row
    spans = row["spans_unix_s"]
    assert [s[0] for s in spans] == list(row["rounds_ms"])[:-1] and all(a <= b for _, a, b in spans)


def test_the_swizzled_scheduler_goes_in_once_after_cutlass_and_hands_the_kernel_its_copy() -> None:
    probe = _probe()
    source = '#include "cutlass/cutlass.h"\n' + probe._SCHEDULER_ANCHOR + "using GemmKernel = int;\n"
    out = probe.with_swizzled_scheduler(source)
    header_at = out.index("class SwizzledTileSchedulerSm90Group")
    selector_at = out.index("using Scheduler =\n      SwizzledTileSchedulerSm90Group")
    assert out.index(probe._SCHEDULER_ANCHOR) < header_at < selector_at < out.index("using GemmKernel")
    assert out.count("class SwizzledTileSchedulerSm90Group") == 1
    # the copy's changes are there: the swizzle from the arguments, no swizzle padding, ragged strips
    assert "params.log_swizzle_size_ = log_swizzle;" in out
    assert "(1 << log_swizzle_size) * cluster_shape" not in out
    assert "cute::min(swizzle, curr_group_cluster_blk_minor - first_minor)" in out
    with pytest.raises(ValueError, match="no single"):
        probe.with_swizzled_scheduler("int main() {}\n")
