"""benchmarks/pergroup_mixed_probe.py on the CPU: which configs it times (the bases, legal, and the model's
mixed twins that rank ahead of their base), and its GPU side against stand-in programs and a stand-in
torch.mm loop: the best run-time variant of the first round is kept, every round starts one config later,
medians and loop / config ratios; a program that fails its check stops the run."""

from __future__ import annotations

import json
import re
import stat
import sys
from pathlib import Path

import pytest

from kernelpilot.targets import get_target_model
from tests.support.benchmark_scripts import load_benchmark_script


def test_each_workload_times_its_bases_and_the_twins_the_model_ranks_ahead() -> None:
    probe = load_benchmark_script("pergroup_mixed_probe")
    sm90 = get_target_model("sm90")
    for name, bases in probe.BASES.items():
        kind, problem, configs = probe.configs_for(name)
        assert kind == ("moe_gemm" if name == "mixtral_8x7b_down" else "grouped_gemm")
        assert len({c.label() for c in configs}) == len(configs)
        assert all(sm90.check(c, problem).valid for c in configs)
        singles = [c for c in configs if not c.extra_tile_n or c.launch == "grouped"]
        assert len(singles) == len(bases)  # every base, in order, then the twins
        twins = [c for c in configs if c.extra_tile_n and c.launch == "per_group"]
        assert twins, name
        for twin in twins:  # its base: the single-width per-group config of the same tile M and launch
            (base,) = [
                c for c in configs
                if not c.extra_tile_n and c.launch == "per_group" and c.swap_ab
                and (c.tile[0], c.cluster, c.schedule, c.tile_scheduler, c.streams)
                == (twin.tile[0], twin.cluster, twin.schedule, twin.tile_scheduler, twin.streams)
            ]  # fmt: skip
            assert sm90.estimate_time_s(twin, problem) < sm90.estimate_time_s(base, problem)


def _program(path: Path, log: Path, median: float, passed: bool = True) -> None:
    """A stand-in program: logs its arguments, reports ``median`` with the first variant it was given."""
    path.write_text(
        f"#!{sys.executable}\n"
        "import json, pathlib, sys\n"
        f"pathlib.Path({str(log)!r}).open('a').write(' '.join([{path.name!r}, *sys.argv[1:]]) + '\\n')\n"
        "arg = next(a for a in sys.argv[1:] if a.startswith('--variants='))\n"
        "raster, swizzle = arg.split('=', 1)[1].split(',')[-1].split(':')\n"
        f"t = {median!r}\n"
        f"print(json.dumps({{'status': {'ok' if passed else 'wrong_result'!r}, 'kernel': 'k', 'config': {{}}, 'problem': {{}},"
        " 'runtime': {'raster': raster, 'swizzle': int(swizzle)}, 'message': 'check failed',"
        f" 'verification': {{'passed': {passed!r}}}, 'time_ms': {{'median': t, 'min': t, 'max': t, 'repetitions': 5}}}}))\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    if not passed:  # a program that fails its check exits 4 after its line
        path.write_text(path.read_text() + "sys.exit(4)\n")


def _setup(tmp_path, monkeypatch, fail: str | None = None):
    probe = load_benchmark_script("pergroup_mixed_probe")
    kind, problem, configs = probe.configs_for("llama3_8b_mlp_up_varlen8")
    log = tmp_path / "runs.log"
    binaries = {}
    for i, cfg in enumerate(configs):
        path = tmp_path / f"prog{i}"
        _program(path, log, 1.0 + 0.1 * i, passed=cfg.label() != fail)
        binaries[cfg.label()] = path
    loops = iter([1.5, 1.6, 1.7])
    monkeypatch.setattr(
        "kernelpilot.tile_tuner.torch_baselines.grouped",
        lambda problem, device, rule: {"torch.mm loop": {"time_ms": {"median": next(loops)}}},
    )
    monkeypatch.setattr(probe, "_gpu_name", lambda: "NVIDIA H100 80GB HBM3")
    return probe, kind, problem, configs, binaries, log


def test_rounds_keep_the_first_rounds_variant_and_rotate_their_start(tmp_path, monkeypatch) -> None:
    probe, kind, problem, configs, binaries, log = _setup(tmp_path, monkeypatch)
    out = probe.measure("llama3_8b_mlp_up_varlen8", kind, problem, configs, binaries, rounds=3)
    runs = [line.split() for line in log.read_text().splitlines()]
    assert len(runs) == 3 * len(configs)
    order = [r[0] for r in runs]
    n = len(configs)
    assert order[:n] == [f"prog{i}" for i in range(n)]
    assert order[n : 2 * n] == [f"prog{(i + 1) % n}" for i in range(n)]  # round 2 starts one later
    # round 1 offers every run-time variant, later rounds only the one that round reported
    first = {r[0]: next(a for a in r if a.startswith("--variants=")) for r in runs[:n]}
    later = [next(a for a in r if a.startswith("--variants=")) for r in runs[n:]]
    assert all("," in v for v in first.values()) and all("," not in v for v in later)
    assert out["torch_mm_loop"]["median_ms"] == 1.6
    rows = {r["config"]: r for r in out["configs"]}
    assert [r["median_ms"] for r in out["configs"]] == sorted(r["median_ms"] for r in out["configs"])
    for i, cfg in enumerate(configs):
        row = rows[cfg.label()]
        assert row["median_ms"] == pytest.approx(1.0 + 0.1 * i)
        assert row["loop_over_config"] == pytest.approx(1.6 / (1.0 + 0.1 * i))
        assert row["model_ms"] > 0
    json.dumps(out)  # the record is plain JSON


def test_a_program_that_fails_its_check_stops_the_run(tmp_path, monkeypatch) -> None:
    probe, kind, problem, configs, binaries, _ = _setup(tmp_path, monkeypatch, fail=None)
    bad = configs[-1].label()
    _program(binaries[bad], tmp_path / "bad.log", 1.0, passed=False)
    with pytest.raises(SystemExit, match=re.escape(f"{bad}: wrong_result")):
        probe.measure("llama3_8b_mlp_up_varlen8", kind, problem, configs, binaries, rounds=2)
