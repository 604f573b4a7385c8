"""Proposers by name: the built-in ones and any a package registers under the ``kernelpilot.proposers``
entry-point group (``name = "package.module:ProposerClass"``).

A class is imported only when its proposer is chosen, so heavy libraries (optuna, litellm) stay out
of start-up; the names are known without importing anything.
"""

from __future__ import annotations

import functools
import importlib
from importlib.metadata import entry_points
from typing import Any

from kernelpilot.errors import InputError

GROUP = "kernelpilot.proposers"

#: name -> "module:Class" of the proposers that ship with kernelpilot (the default, ``model``, first)
BUILTIN = {
    "model": "kernelpilot.tile_tuner.proposers.simple:ModelProposer",
    "exhaustive": "kernelpilot.tile_tuner.proposers.simple:ExhaustiveProposer",
    "random": "kernelpilot.tile_tuner.proposers.simple:RandomProposer",
    "bayes": "kernelpilot.tile_tuner.proposers.bayes:BayesProposer",
    "llm": "kernelpilot.tile_tuner.proposers.llm:LLMProposer",
    "hybrid": "kernelpilot.tile_tuner.proposers.llm:HybridProposer",
}


@functools.cache
def registered() -> dict[str, str]:
    """Every proposer name -> "module:Class"; a built-in name is never replaced by an entry point."""
    found = dict(BUILTIN)
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep.value)
    return found


def proposer_class(name: str) -> Any:
    """The class of the proposer called ``name``; an unknown name is an InputError listing the known."""
    known = registered()
    if name not in known:
        raise InputError(f"unknown proposer {name!r}; allowed: {', '.join(known)}", field="proposer")
    module, _, attr = known[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def check_options(name: str, options: dict[str, Any], where: str = "") -> Any:
    """``options`` validated by proposer ``name``'s options model (``Proposer.Options``), so bad options
    fail when the batch is read, before anything is built; an :class:`InputError` names the option and
    what is allowed."""
    from kernelpilot.tile_tuner.proposers.base import parse_options

    return parse_options(name, proposer_class(name).Options, options, where)
