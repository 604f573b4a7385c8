"""Every proposer declares its options as a pydantic model; an unknown option or a bad value is bad input
(exit 2) naming the option and what is allowed, from a batch file, the CLI or the Python API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelpilot.cli import main
from kernelpilot.errors import InputError
from kernelpilot.tile_tuner.batch import load_batch
from kernelpilot.tile_tuner.proposers import make_proposer, registry
from kernelpilot.tile_tuner.proposers.base import ProposerOptions
from kernelpilot.tile_tuner.space import SearchSpace
from tests.support import run_cli
from tests.support.tuner_doubles import ToyModel

BATCH = """
target: sm90
defaults: {kernel: gemm, dtype: bf16, budget_configs: 3, proposer: bayes, proposer_options: OPTIONS}
workloads:
  - name: square
    dims: {M: 1024, N: 1024, K: 1024}
"""


def _space() -> SearchSpace:
    return SearchSpace(ToyModel(), "gemm", "bf16", {"M": 1000, "N": 1000, "K": 8, "dtype": "bf16"})


@pytest.mark.parametrize("name", list(registry.BUILTIN))
def test_every_builtin_proposer_declares_a_closed_options_model(name):
    options = registry.proposer_class(name).Options
    assert issubclass(options, ProposerOptions) and options.model_config["extra"] == "forbid"
    with pytest.raises(InputError, match=f"proposer {name!r}: unknown option 'colour'; allowed: ") as err:
        registry.check_options(name, {"colour": "red"})
    assert err.value.field == "proposer_options.colour"


def test_bayes_takes_startup_and_rejects_a_bad_value_naming_the_allowed_range():
    pytest.importorskip("optuna")
    proposer = make_proposer("bayes", _space(), seed=0, startup=7)
    assert proposer.options.startup == 7 and proposer._study.sampler._n_startup_trials == 7  # noqa: SLF001
    with pytest.raises(
        InputError,
        match=r"option .startup.: .*greater than or equal to 1 \(got 0\); allowed: startup \(int, >= 1, default 4",
    ) as err:
        make_proposer("bayes", _space(), startup=0)
    assert err.value.field == "proposer_options.startup"
    with pytest.raises(InputError, match="option 'startup'"):
        make_proposer("bayes", _space(), startup="many")


def test_a_proposer_without_options_says_so():
    with pytest.raises(
        InputError, match=r"unknown option 'startup'; allowed: none \(this proposer takes no options\)"
    ):
        make_proposer("random", _space(), startup=4)


def test_batch_options_reach_the_workload_and_are_checked_when_the_file_is_read(tmp_path):
    pytest.importorskip("optuna")
    good = tmp_path / "good.yaml"
    good.write_text(BATCH.replace("OPTIONS", "{startup: 8}"))
    _, [w], _ = load_batch(good)
    assert (w.proposer, w.proposer_options) == ("bayes", {"startup": 8})
    bad = tmp_path / "bad.yaml"
    bad.write_text(BATCH.replace("OPTIONS", "{startup: 8, warmup: 2}"))
    with pytest.raises(
        InputError, match=r"bad.yaml: workload 'square' .*unknown option 'warmup'; allowed: startup"
    ):
        load_batch(bad)
    # the CLI's --proposer-options replaces the file's, and is checked the same way
    _, [w], _ = load_batch(good, {"proposer_options": {"startup": 2}})
    assert w.proposer_options == {"startup": 2}
    with pytest.raises(InputError, match="proposer 'model': unknown option 'startup'"):
        load_batch(good, {"proposer": "model"})  # the file's bayes options do not fit another proposer


@pytest.mark.parametrize(
    ("flag", "needle"),
    [
        ('{"startup": 0}', "option 'startup'"),
        ('{"temperature": 1}', "unknown option 'temperature'; allowed: startup"),
        ("startup=4", "--proposer-options"),
        ("[4]", "must be a JSON object"),
    ],
)
def test_cli_bad_proposer_options_exit_2_and_write_nothing(tmp_path, capsys, flag, needle):
    pytest.importorskip("optuna")
    out = tmp_path / "out"
    code = main(["tune", "--target", "sm90", "--kernel", "gemm", "--dims", "M=64,N=64,K=64", "--proposer", "bayes",
                 "--proposer-options", flag, "--dry-run", "--out", str(out)])  # fmt: skip
    assert code == 2 and needle in capsys.readouterr().err
    assert not out.exists()


def test_cli_smoke_options_reach_a_dry_run_and_a_bad_file_exits_2(tmp_path):
    pytest.importorskip("optuna")
    good = tmp_path / "good.yaml"
    good.write_text(BATCH.replace("OPTIONS", "{startup: 2}"))
    r = run_cli("tune", str(good), "--dry-run", "--json", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    [w] = json.loads(Path(tmp_path / "o" / "plan.json").read_text())["workloads"]
    assert len(w["planned"]) == 3
    bad = tmp_path / "bad.yaml"
    bad.write_text(BATCH.replace("OPTIONS", "{startup: -1}"))
    r = run_cli("tune", str(bad), "--dry-run", "--out", str(tmp_path / "o2"))
    assert r.returncode == 2 and "bad.yaml" in r.stderr and "proposer_options.startup" in r.stderr
    assert not (tmp_path / "o2").exists()
