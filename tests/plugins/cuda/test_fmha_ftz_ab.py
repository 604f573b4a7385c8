"""benchmarks/fmha_ftz_ab.py's GPU side, run against stand-in programs (shell scripts printing the
programs' JSON line): alternating order, medians and speedup, a failing case that does not stop the rest."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from tests.support.benchmark_scripts import load_benchmark_script

ROOT = Path(__file__).resolve().parents[3]


def _driver(script: str = "fmha_ftz_ab"):
    return load_benchmark_script(script)


def _program(path: Path, log: Path, times: list[float], status: str = "ok", passed: bool = True) -> None:
    """A stand-in that logs its name and arguments and prints the next of ``times`` as its result line."""
    result = {
        "status": status,
        "kernel": "fa_prefill",
        "config": {},
        "problem": {},
        "verification": {"passed": passed},
    }
    path.write_text(
        f"#!{sys.executable}\n"
        "import json, pathlib, sys\n"
        f"log, counter = pathlib.Path({str(log)!r}), pathlib.Path({str(path) + '.n'!r})\n"
        "n = int(counter.read_text()) if counter.exists() else 0\n"
        "counter.write_text(str(n + 1))\n"
        f"log.open('a').write(' '.join([{path.name!r}, *sys.argv[1:]]) + '\\n')\n"
        f"t = {times!r}[n]\n"
        f"print(json.dumps({{**{result!r}, 'time_ms': {{'median': t, 'min': t, 'max': t, 'repetitions': 5}}}}))\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_rounds_alternate_and_a_failing_case_is_reported_while_the_others_are_measured(tmp_path):
    drv = _driver()
    log = tmp_path / "calls.log"
    _program(tmp_path / "a_off", log, [2.0, 2.2, 2.0, 2.1])
    _program(tmp_path / "a_on", log, [1.6, 1.6, 1.7, 1.6])
    _program(tmp_path / "b_off", log, [1.0, 1.0, 1.0, 1.0])
    _program(tmp_path / "b_on", log, [0.9, 0.9, 0.9, 0.9], status="wrong_result", passed=False)
    cases = [
        {"kind": "fa_prefill", "workload": "w_a", "config": {"tile": [128, 128, 64]}, "args": ["--b=4"],
         "binaries": {"without_ftz": "a_off", "with_ftz": "a_on"}},
        {"kind": "fa_decode", "workload": "w_b", "config": {"tile": [64, 64, 64]}, "args": ["--b=64"],
         "binaries": {"without_ftz": "b_off", "with_ftz": "b_on"}},
    ]  # fmt: skip
    (tmp_path / drv.MANIFEST).write_text(json.dumps({"cases": cases}))
    rows = drv.measure(tmp_path, rounds=4, baseline="without_ftz")
    a, b = rows
    calls = [line.split()[0] for line in log.read_text().splitlines()]
    # case a: off/on, then on/off, ... ; case b stops at its first failing run
    assert calls[:8] == ["a_off", "a_on", "a_on", "a_off", "a_off", "a_on", "a_on", "a_off"]
    assert calls[8:] == ["b_off", "b_on"]
    assert all(line.endswith("--b=4") for line in log.read_text().splitlines()[:8])
    assert a["status"] == "ok"
    assert a["median_ms"] == {"without_ftz": 2.05, "with_ftz": 1.6}
    assert a["speedup"] == {"with_ftz": round(2.05 / 1.6, 4)}
    assert a["spread"]["without_ftz"] == round(0.2 / 2.05, 4)
    assert b["status"] == "failed" and b["why"].startswith("with_ftz: status=wrong_result")


@pytest.mark.parametrize(
    "script", ["fmha_ftz_ab", "fmha_exp2_ab", "fmha_split_ab", "fmha_gqa_ab", "fmha_lpt_ab"]
)
def test_run_without_a_built_folder_exits_2_naming_the_flag(tmp_path, capsys, script):
    drv = _driver(script)
    out = tmp_path / "out.json"
    assert drv.main(["run", "--dir", str(tmp_path / "nothing"), "--out", str(out)]) == 2
    assert "--dir" in capsys.readouterr().err and not out.exists()
    os.makedirs(tmp_path / "built")
    (tmp_path / "built" / _driver().MANIFEST).write_text(json.dumps({"cases": []}))
    assert drv.main(["run", "--dir", str(tmp_path / "built"), "--rounds", "1", "--out", str(out)]) == 2
    assert "--rounds" in capsys.readouterr().err and not out.exists()


def test_the_scripts_without_cutlass_are_refused_by_name_and_write_nothing(tmp_path):
    """No CUTLASS headers (CUTLASS_DIR at an empty folder, run from a folder without .deps): exit 1 naming
    --cutlass-dir, no record and no built programs."""
    import subprocess

    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**os.environ, "CUTLASS_DIR": str(empty)}
    out = tmp_path / "out.json"
    for argv in (["fmha_ftz_sass_check.py", "--out", str(out)],
                 ["fmha_ftz_ab.py", "build", "--dir", str(tmp_path / "programs")],
                 ["fmha_exp2_ab.py", "build", "--dir", str(tmp_path / "programs")],
                 ["fmha_split_ab.py", "build", "--dir", str(tmp_path / "programs")],
                 ["fmha_gqa_ab.py", "build", "--dir", str(tmp_path / "programs")],
                 ["fmha_lpt_ab.py", "build", "--dir", str(tmp_path / "programs")]):  # fmt: skip
        r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / argv[0]), *argv[1:]], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
        assert r.returncode == 1 and "CUTLASS headers not found" in r.stderr, r.stderr
        assert "(--cutlass-dir or CUTLASS_DIR)" in r.stderr
    assert not out.exists()
    assert not any((tmp_path / "programs").glob("*"))


def test_split_ab_renders_the_tuner_program_from_a_revision_and_the_earlier_program_from_its_own():
    """The A/B's ``new`` side is the tuner's program; the revision loader renders a git revision's templates
    under the same settings (HEAD's: byte for byte the tuner's program), and the default earlier revision
    gives the per-chunk Q copy that template 4 removed."""
    import subprocess

    from kernelpilot.dsl_plugins.cuda.fmha import FmhaKernel

    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    drv = _driver("fmha_split_ab")
    common = _driver("cuda_kinds_common")
    workload, config = drv.DEFAULT_CASES[0]
    problem = common.problems()["fa_decode"][workload]
    tuner = next(iter(FmhaKernel("fa_decode").render(dict(config), problem, "sm90").sources.values()))
    args, new = drv.render_case(workload, config)
    assert new == tuner and args and all(a.startswith("--") for a in args)
    head_tree = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD", "--", "cpp_templates"])
    if head_tree.returncode == 0:  # the working tree's templates are HEAD's
        _, at_head = drv.render_case(workload, config, drv.revision_env("HEAD", ROOT))
        assert at_head == tuner
    known = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{drv.DEFAULT_BEFORE}^{{commit}}"])
    if known.returncode != 0:
        pytest.skip(f"{drv.DEFAULT_BEFORE} not in this clone's history")
    _, old = drv.render_case(workload, config, drv.revision_env(drv.DEFAULT_BEFORE, ROOT), drv.BEFORE_VERSION)
    assert "replicate_q<<<" in old and "replicate_q" not in new
    assert "// template version 3." in old and "// template version 4." in new
    with pytest.raises(FileNotFoundError, match="no-such-revision"):
        drv.revision_env("no-such-revision", ROOT).get_template("cuda/fmha_sm90.cu.j2")


def test_prefill_programs_change_from_template_3_only_by_the_shared_kv_heads():
    """Decode template 4 left the prefill programs as template 3 rendered them; prefill template 5 changes
    them only by the shared-K/V-head path (``kv_groups``): with it off and version 3, every prefill config
    the A/B scripts time renders from this checkout exactly as from the template-3 revision's templates,
    and with it on the source differs."""
    import subprocess

    from kernelpilot.dsl_plugins.cuda.fmha import normalize_fmha_config, render_fmha_program

    drv = _driver("fmha_split_ab")
    known = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{drv.DEFAULT_BEFORE}^{{commit}}"])
    if known.returncode != 0:
        pytest.skip(f"{drv.DEFAULT_BEFORE} not in this clone's history")
    common = _driver("cuda_kinds_common")
    exp2 = _driver("fmha_exp2_ab")
    old_env = drv.revision_env(drv.DEFAULT_BEFORE, ROOT)
    problems = common.problems()["fa_prefill"]
    for _, workload, config, periods in exp2.DEFAULT_CASES:
        problem = problems[workload]
        for period in periods:
            cfg = normalize_fmha_config({**config, "exp2_emulation": period}, problem["head_dim"])
            now = render_fmha_program("fa_prefill", cfg, problem, version="3", kv_groups=False).sources
            before = render_fmha_program("fa_prefill", cfg, problem, old_env, "3").sources
            assert now == before, (workload, config, period)
            assert render_fmha_program("fa_prefill", cfg, problem).sources != before


def test_run_mode_writes_the_record_with_its_build_facts_and_exits_1_on_a_failed_case(tmp_path, capsys):
    """The shared run mode (run_and_record), through the split A/B's command line: the record names the
    script's command, the manifest's build facts (the split A/B's earlier revision too) and every row; a
    failing case is reported and makes the exit status 1 after the others are measured."""
    drv = _driver("fmha_split_ab")
    log = tmp_path / "calls.log"
    _program(tmp_path / "c0_old", log, [1.2, 1.2])
    _program(tmp_path / "c0_new", log, [1.0, 1.0])
    _program(tmp_path / "c1_old", log, [1.0, 1.0])
    _program(tmp_path / "c1_new", log, [0.9, 0.9], status="wrong_result", passed=False)
    cases = [{"kind": "fa_decode", "workload": f"w{i}", "config": {"splits": 4}, "args": ["--b=4"],
              "binaries": {"old": f"c{i}_old", "new": f"c{i}_new"}} for i in (0, 1)]  # fmt: skip
    built = {"nvcc": "nvcc 13.0", "cutlass": "cutlass 4.2.0", "flags": ["-ftz=true"], "before": "abc1234"}
    (tmp_path / _driver().MANIFEST).write_text(json.dumps({**built, "cases": cases}))
    out = tmp_path / "ab.json"
    assert drv.main(["run", "--dir", str(tmp_path), "--rounds", "2", "--out", str(out)]) == 1
    record = json.loads(out.read_text())
    assert record["built_with"] == built
    assert (
        record["command"]
        == f"python benchmarks/fmha_split_ab.py run --dir {tmp_path} --rounds 2 --out ab.json"
    )
    ok, failed = record["rows"]
    assert ok["status"] == "ok" and ok["speedup"] == {"new": 1.2}
    assert failed["status"] == "failed" and failed["why"].startswith("new: status=wrong_result")
    printed = capsys.readouterr().out
    assert "w0 " in printed and "speedup {'new': 1.2}" in printed and "w1 " in printed and "failed" in printed


def test_split_ab_build_refuses_an_unknown_revision_by_name(tmp_path, capsys):
    """`--before` naming no revision of this clone: exit 1, the flag and the revision in the message, and
    nothing rendered or built."""
    import subprocess

    cutlass = ROOT / ".deps" / "cutlass"
    if not cutlass.exists():
        pytest.skip("needs CUTLASS headers in .deps/cutlass (README setup)")
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    drv = _driver("fmha_split_ab")
    folder = tmp_path / "programs"
    argv = ["build", "--dir", str(folder), "--cutlass-dir", str(cutlass), "--before", "no-such-revision"]
    assert drv.main(argv) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith("error: --before no-such-revision: ") and "cpp_templates/cuda/fmha_sm90.cu.j2" in err
    )
    assert not list(folder.glob("case*"))


def test_a_variant_runs_with_its_own_arguments_when_the_case_gives_them(tmp_path):
    """``args_of``: template 3 of the GQA A/B takes no ``--g``; each variant gets its own arguments and the
    row keeps both (a case without ``args_of`` runs ``args`` for every variant: the first test above)."""
    drv = _driver()
    log = tmp_path / "calls.log"
    _program(tmp_path / "p_t3", log, [1.1, 1.1])
    _program(tmp_path / "p_t5", log, [1.0, 1.0])
    args_of = {"t3": ["--b=4", "--h=28"], "t5": ["--b=4", "--h=28", "--g=7"]}
    case = {"kind": "fa_prefill", "workload": "w", "config": {}, "args": args_of["t5"], "args_of": args_of,
            "binaries": {"t3": "p_t3", "t5": "p_t5"}}  # fmt: skip
    (tmp_path / drv.MANIFEST).write_text(json.dumps({"cases": [case]}))
    (row,) = drv.measure(tmp_path, rounds=2, baseline="t3")
    seen = {tuple(line.split()) for line in log.read_text().splitlines()}
    assert seen == {("p_t3", "--b=4", "--h=28"), ("p_t5", "--b=4", "--h=28", "--g=7")}
    assert row["args_of"] == args_of and row["speedup"] == {"t5": 1.1}


def test_gqa_ab_cases_are_causal_gqa_and_template_3_runs_without_g():
    """Every case of the GQA A/B is a causal grouped-query prefill workload; template 5 runs the tuner's
    arguments (with ``--g`` = the group size), template 3 the same without it; a workload without groups
    is refused by name."""
    from kernelpilot.dsl_plugins.cuda.fmha import FmhaKernel

    drv = _driver("fmha_gqa_ab")
    common = _driver("cuda_kinds_common")
    prefill = common.problems()["fa_prefill"]
    assert {w for w, _ in drv.DEFAULT_CASES} == {
        w for w, p in prefill.items() if p["causal"] and p["num_heads_q"] > p["num_heads_kv"]
    }
    for workload, _ in drv.DEFAULT_CASES:
        p = prefill[workload]
        args = drv.variant_args(workload, p)
        tuner, _ = FmhaKernel("fa_prefill").run_command(Path("B"), p, {})
        assert args["t5"] == tuner[1:]
        assert f"--g={p['num_heads_q'] // p['num_heads_kv']}" in args["t5"]
        assert args["t3"] == [a for a in args["t5"] if not a.startswith("--g=")]
    mha = {**prefill["llama3_8b_prefill_4k"], "num_heads_kv": 32}
    with pytest.raises(ValueError, match="mha_case is not a causal grouped-query problem"):
        drv.variant_args("mha_case", mha)


def test_gqa_ab_template_5_side_is_the_tuners_program_and_template_3_side_differs():
    """The A/B's template-5 program of every case is byte for byte what the tuner builds for that config
    (so its timing is the tuned program's), and its template-3 program is a different source."""
    from kernelpilot.dsl_plugins.cuda.fmha import FmhaKernel, normalize_fmha_config, render_fmha_program

    drv = _driver("fmha_gqa_ab")
    prefill = _driver("cuda_kinds_common").problems()["fa_prefill"]
    for workload, config in drv.DEFAULT_CASES:
        problem = prefill[workload]
        cfg = normalize_fmha_config(dict(config), problem["head_dim"])
        tuner = FmhaKernel("fa_prefill").render(dict(config), problem, "sm90").sources
        sides = {label: render_fmha_program("fa_prefill", cfg, problem, version=v, kv_groups=kv).sources
                 for label, (v, kv) in drv.VARIANTS.items()}  # fmt: skip
        assert sides["t5"] == tuner, workload
        assert sides["t3"] != tuner, workload


def test_lpt_ab_covers_every_causal_prefill_workload_with_both_orders_of_the_tuners_programs():
    """One case per causal prefill workload; the two sides are one config with ``longest_first`` and with
    ``lpt``, each rendered as build() renders it, byte for byte what the tuner builds for that config (so
    the timings are the tuned programs'), and the two sources differ."""
    from kernelpilot.dsl_plugins.cuda.fmha import FmhaKernel, normalize_fmha_config, render_fmha_program

    drv = _driver("fmha_lpt_ab")
    prefill = _driver("cuda_kinds_common").problems()["fa_prefill"]
    assert sorted(w for w, _ in drv.DEFAULT_CASES) == sorted(w for w, p in prefill.items() if p["causal"])
    kernel = FmhaKernel("fa_prefill")
    for workload, config in drv.DEFAULT_CASES:
        problem = prefill[workload]
        sides = drv.variants(config)
        assert sides["lf"]["longest_first"] and "lpt" not in sides["lf"], workload
        assert sides["lpt"]["lpt"] and "longest_first" not in sides["lpt"], workload
        assert {k: v for k, v in sides["lpt"].items() if k != "lpt"} == {
            k: v for k, v in sides["lf"].items() if k != "longest_first"
        }
        sources = {label: kernel.render(cfg, problem, "sm90").sources for label, cfg in sides.items()}
        for label, cfg in sides.items():
            normalized = normalize_fmha_config(dict(cfg), problem["head_dim"])
            assert render_fmha_program("fa_prefill", normalized, problem).sources == sources[label], workload
        assert sources["lf"] != sources["lpt"], workload
