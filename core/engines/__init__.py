"""Engines: where stage candidates come from.

* ``rules`` -- the plugins' deterministic ``engine="rules"`` stages; no LLM, always available.
* ``llm``   -- the plugins' ``engine="llm"`` stages, else the core's generic :class:`LLMStage` driven by the
  plugin's prompt templates; rules stages fill the stages that have no template.
* ``claude`` -- no in-process optimization: writes an agent workspace (see ``claude_workspace``).
"""
