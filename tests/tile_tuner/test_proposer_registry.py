"""Proposers are looked up in a registry: the built-ins plus the ``kernelpilot.proposers`` entry points."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from kernelpilot.errors import InputError
from kernelpilot.tile_tuner.proposers import registry
from kernelpilot.tile_tuner.proposers.simple import RandomProposer


@pytest.fixture
def fresh_registry(monkeypatch):
    registry.registered.cache_clear()
    yield monkeypatch
    registry.registered.cache_clear()


def test_builtins_resolve_lazily_to_their_classes(fresh_registry):
    assert list(registry.registered())[:6] == ["model", "exhaustive", "random", "bayes", "llm", "hybrid"]
    assert registry.proposer_class("random") is RandomProposer


def test_unknown_proposer_names_the_allowed_ones(fresh_registry):
    with pytest.raises(InputError, match="unknown proposer 'annealing'; allowed: model, exhaustive") as e:
        registry.proposer_class("annealing")
    assert e.value.field == "proposer"


def test_entry_point_adds_a_proposer_but_cannot_shadow_a_builtin(fresh_registry):
    eps = [
        EntryPoint("annealing", "kernelpilot.tile_tuner.proposers.simple:RandomProposer", registry.GROUP),
        EntryPoint("model", "kernelpilot.tile_tuner.proposers.simple:RandomProposer", registry.GROUP),
    ]
    fresh_registry.setattr(registry, "entry_points", lambda group: eps if group == registry.GROUP else [])
    assert registry.proposer_class("annealing") is RandomProposer
    assert registry.registered()["model"] == registry.BUILTIN["model"]
