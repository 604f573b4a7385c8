"""The Hopper FMHA model under test and the problem its tests share: the gpt-oss-20b prefill shape
(causal, head dim 64, GQA 64/8), where every FMHA family and knob has a legal config."""

from __future__ import annotations

from typing import Any

from kernelpilot.targets import get_target_model

SM90 = get_target_model("sm90")
PREFILL_D64 = {
    "batch": 4,
    "num_heads_q": 64,
    "num_heads_kv": 8,
    "seq_qo": 4096,
    "seq_kv": 4096,
    "head_dim": 64,
    "causal": True,
    "dtype": "bf16",
}


def fa(
    tile: tuple[int, int, int], schedule: str = "cooperative", kernel: str = "fa_prefill", **extra: Any
) -> Any:
    """An sm90 FMHA config parsed by the model, as a tuning run's YAML would give it."""
    return SM90.parse_config({"kernel": kernel, "tile": list(tile), "schedule": schedule, **extra})
