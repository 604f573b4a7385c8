"""The constraint models against configurations taken from the libraries themselves.

Every ``valid`` case is a configuration sycl-tla or CUTLASS compiles (examples, benchmarks, unit tests,
Python generator); every ``invalid`` case breaks a static_assert or a documented/measured rule and must
be rejected with the listed rule ids.  The YAML files cite the source line of each case.
"""

from __future__ import annotations

import pytest
import yaml

from kernelpilot.targets import get_target_model
from tests.support import REPO

DATA = REPO / "tests" / "data" / "hw_models"


def _cases(name: str) -> list[dict]:
    doc = yaml.safe_load((DATA / name).read_text())
    cases = doc["cases"]
    for i, case in enumerate(cases):
        case.setdefault("id", f"{name}:{i}")
        assert case.get("source"), f"{case['id']} has no source citation"
    return cases


XE_CASES = _cases("xe_library_configs.yaml")
SM90_CASES = _cases("sm90_library_configs.yaml") + _cases("sm90_generator_configs.yaml")


def _assert_case(model, case: dict) -> None:
    cfg = model.parse_config(case["config"], where=case["id"])
    result = model.check(cfg, case.get("problem"))
    if case["expect"] == "valid":
        assert result.valid, f"{case['id']} ({case['source']}) rejected: {result.violations}"
    else:
        assert not result.valid, f"{case['id']} ({case['source']}) accepted but must be rejected"
        got = set(result.rules())
        missing = set(case["rules"]) - got
        assert not missing, f"{case['id']}: expected rules {case['rules']}, got {sorted(got)}"
    # canonical form round-trips: the tuner hashes as_dict and templates read it
    again = model.parse_config(cfg.as_dict(), where=case["id"])
    assert model.check(again).valid == model.check(cfg).valid
    assert again.as_dict() == cfg.as_dict()


@pytest.mark.parametrize("target", ["bmg", "pvc"])
@pytest.mark.parametrize("case", XE_CASES, ids=[c["id"] for c in XE_CASES])
def test_xe_library_configs(target: str, case: dict) -> None:
    _assert_case(get_target_model(target), case)


@pytest.mark.parametrize("case", SM90_CASES, ids=[c["id"] for c in SM90_CASES])
def test_sm90_library_configs(case: dict) -> None:
    _assert_case(get_target_model("sm90"), case)


def test_data_sets_are_substantial() -> None:
    """Both directions are covered for both families (guards against an emptied data file)."""
    for cases in (XE_CASES, SM90_CASES):
        assert sum(c["expect"] == "valid" for c in cases) >= 20
        assert sum(c["expect"] == "invalid" for c in cases) >= 12
