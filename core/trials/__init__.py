"""Persisted trial trees: every optimization attempt is a node (parent, stage, code, verdict, times)."""

from kernelpilot.trials.store import TreeIdentity, TrialNode, TrialStore

__all__ = ["TrialNode", "TrialStore", "TreeIdentity"]
