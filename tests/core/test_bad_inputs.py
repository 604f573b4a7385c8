"""Every CLI entry that reads a user file answers a bad path with one clean message and exit 2.

The CLI is called in-process through :func:`kernelpilot.cli.main` (the same code path as the
console script, without paying an interpreter start per case): a traceback would escape as an
exception and fail the test; a clean error returns 2 and prints ``error: ... <path>``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelpilot.cli import main
from tests.support import REPO

KERNEL = REPO / "examples" / "softmax" / "softmax.py"
SPEC = REPO / "examples" / "softmax" / "softmax.yaml"


def _bad_path(tmp: Path, kind: str) -> Path:
    if kind == "missing":
        return tmp / "absent.yaml"
    if kind == "directory":
        (tmp / "a_folder").mkdir()
        return tmp / "a_folder"
    if kind == "binary":
        p = tmp / "blob.yaml"
        p.write_bytes(b"\x7fELF\x00\x01\xff\xfe")
        return p
    if kind == "not_utf8":
        p = tmp / "latin1.yaml"
        p.write_bytes("target: sm90 # caf\xe9".encode("latin-1"))
        return p
    if kind == "unreadable":
        if os.geteuid() == 0:
            pytest.skip("root reads files whatever their mode")
        p = tmp / "locked.yaml"
        p.write_text("target: sm90\n")
        p.chmod(0)
        return p
    raise AssertionError(kind)


ENTRIES = {
    "tune batch": lambda p, t: ["tune", str(p), "--dry-run", "--out", str(t / "o")],
    "check-tiles": lambda p, t: ["check-tiles", "--target", "sm90", "--input", str(p)],
    "report": lambda p, t: ["report", str(p), "--out", str(t / "o")],
    "optimize kernel": lambda p, t: ["optimize", "-i", str(p), "-s", str(SPEC), "--engine", "rules"],
    "optimize spec": lambda p, t: ["optimize", "-i", str(KERNEL), "-s", str(p), "--engine", "rules"],
    "skill analyze": lambda p, t: ["skill", "analyze", str(p)],
    "skill validate": lambda p, t: ["skill", "validate", str(p)],
    "skill profile": lambda p, t: ["skill", "profile", str(p), "-s", str(SPEC), "--device", "cpu"],
    "skill benchmark": lambda p, t: ["skill", "benchmark", "-s", str(SPEC), str(p), "--device", "cpu"],
    "tune replay": lambda p, t: [
        "tune",
        "--target",
        "sm90",
        "--dims",
        "M=128,N=128,K=128",
        "--replay",
        str(p),
        "--out",
        str(t / "o"),
    ],  # fmt: skip
}


@pytest.mark.parametrize("kind", ["missing", "directory", "binary", "not_utf8", "unreadable"])
@pytest.mark.parametrize("entry", list(ENTRIES))
def test_each_cli_entry_reports_a_bad_path_cleanly(entry, kind, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no stray .env, nothing written next to the repository
    bad = _bad_path(tmp_path, kind)
    rc = main(ENTRIES[entry](bad, tmp_path))
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "error:" in err and str(bad) in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "o").exists(), "nothing may be written for bad input"


@pytest.mark.parametrize("kind", ["directory", "binary", "not_utf8"])
def test_a_bad_dotenv_is_a_clean_error(kind, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = tmp_path / ".env"
    if kind == "directory":
        env.mkdir()
    else:
        env.write_bytes(b"\x00\xff" if kind == "binary" else "LLM_MODEL=caf\xe9".encode("latin-1"))
    rc = main(["skill", "analyze", str(KERNEL)])
    err = capsys.readouterr().err
    assert rc == 2 and ".env" in err, err


SINGLE = ["tune", "--target", "sm90", "--dims", "M=128,N=128,K=128", "--dry-run"]


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--run-timeout", "0"], "--run-timeout"),
        (["--run-timeout", "-5"], "--run-timeout"),
        (["--run-timeout", "nan"], "--run-timeout"),
        (["--build-timeout", "-5"], "--build-timeout"),
        (["--build-timeout", "inf"], "--build-timeout"),
        (["--batch-size", "-3"], "--batch-size"),
        (["--budget-minutes", "-1"], "--budget-minutes"),
        (["--reps", "0"], "--reps"),
        (["--target-ms", "-1"], "--target-ms"),
        (["--jobs", "0"], "--jobs"),
        (["--seed", str(2**70)], "--seed"),
        (["--seed", "-1"], "--seed"),
        (["--device", "arc_b580"], "--device"),
        (["--dims", "M=1,M=2,N=3,K=4"], "--dims"),
    ],
)
def test_bad_numbers_and_inconsistent_flags_exit_2_naming_the_flag(flags, field, tmp_path, capsys):
    args = [*SINGLE, "--out", str(tmp_path / "o"), *flags]
    if flags[0] == "--dims":
        args = [a for i, a in enumerate(args) if a != "--dims" and (i == 0 or args[i - 1] != "--dims")]
        args += flags
    rc = main(args)
    err = capsys.readouterr().err
    assert rc == 2 and field in err, err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("flag", ["--out", "--store", "--cache-dir"])
def test_output_paths_are_checked_before_the_run(flag, tmp_path, capsys):
    a_file = tmp_path / "plain.txt"
    a_file.write_text("x")
    a_dir = tmp_path / "folder"
    a_dir.mkdir()
    bad = {"--out": a_file, "--store": a_dir, "--cache-dir": a_file / "sub"}[flag]
    rc = main(["tune", "--target", "sm90", "--dims", "M=128,N=128,K=128", flag, str(bad), "--out", str(tmp_path / "o")]
              if flag != "--out" else ["tune", "--target", "sm90", "--dims", "M=128,N=128,K=128", flag, str(bad)])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and flag in err and str(bad) in err, err


def test_xe_forge_output_pointing_at_a_folder_is_rejected_before_the_run(tmp_path, capsys):
    (tmp_path / "outdir").mkdir()
    batch = tmp_path / "xe.yaml"
    batch.write_text(
        f"mode: gemm\noutput: {tmp_path / 'outdir'}\ntune-xpu:\n  - {{name: a, dims: {{M: 256, N: 256, K: 256}}}}\n"
    )
    rc = main(["tune", str(batch), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "output" in err and "folder" in err, err
    assert not (tmp_path / "o").exists()


def test_optimize_output_paths_are_checked_before_the_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rec").mkdir()
    rc = main(["optimize", "-i", str(KERNEL), "-s", str(SPEC), "--engine", "rules", "--record", "rec"])
    err = capsys.readouterr().err
    assert rc == 2 and "--record" in err, err
    (tmp_path / "logs").write_text("a file where LOG_DIR should be")
    monkeypatch.setenv("LOG_DIR", "logs")
    rc = main(["optimize", "-i", str(KERNEL), "-s", str(SPEC), "--engine", "rules"])
    err = capsys.readouterr().err
    assert rc == 2 and "LOG_DIR" in err, err
    monkeypatch.delenv("LOG_DIR")
    (tmp_path / "logs").unlink()
    (tmp_path / "trials").write_text("a file where TRIALS_DIR should be")
    rc = main(["optimize", "-i", str(KERNEL), "-s", str(SPEC), "--engine", "rules"])
    err = capsys.readouterr().err
    assert rc == 2 and "TRIALS_DIR" in err, err
    assert not list(tmp_path.glob("optimized_kernels*"))


def test_every_pydantic_problem_is_listed_and_a_typo_key_is_named(tmp_path, capsys):
    batch = tmp_path / "b.yaml"
    batch.write_text(
        "target: sm90\nworkloads:\n  - name: a\n    dimz: {M: 128, N: 128, K: 128}\n    seed: 99999999999\n"
    )
    rc = main(["tune", str(batch), "--dry-run", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "dimz: workload 'a' (workloads[0]): unknown key" in err, err
    assert "dims: workload 'a' (workloads[0]): Field required" in err, err
    assert "seed" in err and "3 problems" in err, err


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "mode: gemm\ntune-xpu:\n  - {name: a, dims: {M: 128, N: 128, K: 128}}\n"
            "tune-gpu:\n  - {name: b, dims: {M: 128, N: 128, K: 128}}\n",
            "both tune-xpu and tune-gpu",
        ),
        (
            "mode: gemm\ntune-xpu:\n  - {name: a, dims: {M: 128, N: 128, K: 128}}\n"
            "  - {name: a, dims: {M: 256, N: 128, K: 128}}\n",
            "tune-xpu[1].name: workload 'a': duplicate name",
        ),
    ],
)
def test_xe_forge_format_ambiguities_are_errors(text, needle, tmp_path, capsys):
    batch = tmp_path / "xe.yaml"
    batch.write_text(text)
    rc = main(["tune", str(batch), "--dry-run", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err, err


def test_dry_run_of_a_two_kind_batch_writes_nothing_when_the_second_group_is_bad(tmp_path, capsys):
    batch = tmp_path / "b.yaml"
    batch.write_text(
        "target: sm90\nworkloads:\n  - name: ok\n    dims: {M: 256, N: 256, K: 256}\n"
        "  - name: bad\n    kernel: fa_prefill\n    dims: {bogus: 1}\n"
    )
    out = tmp_path / "o"
    rc = main(["tune", str(batch), "--dry-run", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "bad" in err, err
    assert not out.exists() or not any(out.iterdir()), list(out.rglob("*"))


def _old_schema_store(path: Path, version: str) -> None:
    import sqlite3

    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    db.execute("CREATE TABLE measurements (key TEXT PRIMARY KEY, status TEXT)")
    db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (version,))
    db.commit()
    db.close()


@pytest.mark.parametrize("flag", ["--replay", "--store"])
@pytest.mark.parametrize("damage", ["garbage", "old_schema", "truncated"])
def test_corrupt_or_old_stores_are_named_and_nothing_is_created(flag, damage, tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    if damage == "garbage":
        store.write_bytes(b"this is not sqlite" * 100)
    elif damage == "old_schema":
        _old_schema_store(store, "0")
    else:
        _old_schema_store(store, "1")
        store.write_bytes(store.read_bytes()[:1000])
    before = sorted(p.name for p in tmp_path.iterdir())
    out = tmp_path / "o"
    rc = main(
        ["tune", "--target", "sm90", "--dims", "M=128,N=128,K=128", flag, str(store), "--out", str(out)]
    )
    err = capsys.readouterr().err
    assert rc == 2 and str(store) in err and flag in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "no store, output or replay copy created"


@pytest.mark.parametrize(
    ("formula", "needle"),
    [
        ("exp(100000)", "exp(100000) failed"),
        ("min()", "min() failed"),
        ("((N**64)**64)**64", "too large"),
        ("2**2**2**2**2**2", "too large"),
        ("sqrt(-1)", "math domain error"),
    ],
)
def test_spec_formulas_are_bounded(formula, needle, tmp_path):
    import time

    from kernelpilot.errors import InputError
    from kernelpilot.spec import load_spec

    spec = tmp_path / "s.yaml"
    spec.write_text(f'inputs:\n  x: {{shape: [N]}}\nci:\n  - {{dims: {{N: 4}}, flop: "{formula}"}}\n')
    t0 = time.monotonic()
    with pytest.raises(InputError, match=needle.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        load_spec(spec)
    assert time.monotonic() - t0 < 2


@pytest.mark.parametrize("where", ["dims: {N: .inf}", "dims: {N: .nan}"])
def test_non_finite_spec_dims_are_rejected(where, tmp_path):
    from kernelpilot.errors import InputError
    from kernelpilot.spec import load_spec

    spec = tmp_path / "s.yaml"
    spec.write_text(f"inputs:\n  x: {{shape: [N]}}\nci:\n  - {{{where}}}\n")
    with pytest.raises(InputError, match="finite"):
        load_spec(spec)
    spec.write_text("inputs:\n  x: {shape: [.inf]}\nci:\n  - {dims: {N: 4}}\n")
    with pytest.raises(InputError, match="finite"):
        load_spec(spec)


def test_report_validates_a_hand_edited_run_document_before_writing(tmp_path, capsys):
    import json

    doc = {
        "schema_version": 1,
        "target": "sm90",
        "workloads": [
            {
                "name": "w",
                "kernel": "gemm",
                "dtype": "bf16",
                "dims": {"M": 1},
                "best": {"config": {}, "label": "x", "time_ms": -1.0},
                "tried": [
                    {"order": "first", "label": "x", "is_default": True, "status": "ok", "source": "m"}
                ],
            }
        ],
    }
    run = tmp_path / "RUN.json"
    run.write_text(json.dumps(doc))
    out = tmp_path / "o"
    rc = main(["report", str(run), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and str(run) in err, err
    assert "workloads.0.best.time_ms" in err and "workloads.0.tried.0.order" in err, err
    assert not out.exists()
