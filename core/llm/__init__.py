"""LLM access for the pipeline: a litellm client with a response cache, retries and usage totals.

Nothing here imports litellm at module level; :class:`~kernelpilot.llm.client.LLMClient` imports it
on first use so the CLI and every no-LLM flow stay fast and work without litellm installed.
"""
