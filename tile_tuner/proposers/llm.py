"""LLM proposer (litellm through kernelpilot's LLM client) and the hybrid LLM-then-model proposer.

The prompt carries the problem, the hardware limits, a summary of the legal space and a compact
table of the results so far; the reply must be JSON ``{"configs": [{...}, ...]}`` in the target's
config schema.  Every proposal is parsed with the target model (``parse_config``) and checked; an
illegal one is recorded in ``history.invalid`` with its violations (reported as "invalid proposal")
and the violations are fed back in the next prompt.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from typing import Any

from kernelpilot.llm.client import LLMError
from kernelpilot.secrets import redact
from kernelpilot.tile_tuner.proposers.base import History, Proposer
from kernelpilot.tile_tuner.proposers.simple import ModelProposer
from kernelpilot.tile_tuner.space import config_key, config_label


def space_summary(space: Any) -> str:
    fields: dict[str, Counter] = {}
    for c in space.configs:
        for k, v in c.as_dict().items():
            fields.setdefault(k, Counter())[json.dumps(v)] += 1
    lines = [f"{len(space.configs)} legal configs. Values per field (count):"]
    for k, counter in fields.items():
        lines.append(f"  {k}: " + ", ".join(f"{v} ({n})" for v, n in counter.most_common()))
    return "\n".join(lines)


def build_prompt(space: Any, history: History, n: int, device: Any) -> list[dict[str, str]]:
    rows = [
        f"  {config_label(o.config)}: " + (f"{o.time_ms:.4f} ms" if o.time_ms else o.status)
        for o in history.observations
    ]
    invalid = [f"  {json.dumps(i['config'])}: {'; '.join(i['violations'])}" for i in history.invalid[-10:]]
    limits = ""
    if device is not None:
        limits = (
            f"Device {getattr(device, 'name', device)}: {getattr(device, 'cores', '?')} SMs/cores, "
            f"{getattr(device, 'mem_bandwidth_gbs', '?')} GB/s, peak {getattr(device, 'peak_tflops', '?')} TFLOP/s."
        )
    example = json.dumps(space.configs[0].as_dict()) if space.configs else "{}"
    text = "\n".join(
        [
            f"Tune a {space.kernel} kernel ({space.dtype}) for problem {json.dumps(space.problem)}.",
            limits,
            space_summary(space),
            "Measured so far:",
            *(rows or ["  (nothing yet)"]),
            *(["Rejected proposals (illegal; do not repeat):", *invalid] if invalid else []),
            f'Propose {n} NEW configs likely to be faster. Reply with JSON only: {{"configs": [config, ...]}}',
            f"Each config uses exactly the fields of this example: {example}",
        ]
    )
    return [
        {
            "role": "system",
            "content": "You are a GPU performance engineer choosing CUTLASS tile configurations.",
        },
        {"role": "user", "content": text},
    ]


log = logging.getLogger(__name__)


class LLMProposer(Proposer):
    name = "llm"

    def __init__(
        self, space: Any, seed: int = 0, *, device: Any = None, client: Any = None, **options: Any
    ) -> None:
        """``client``: the chat client (an ``LLMClient`` from the settings when None; tests pass a fake)."""
        super().__init__(space, seed, device=device, **options)
        self.client = client
        if self.client is None:
            from kernelpilot.llm.client import LLMClient
            from kernelpilot.settings import load_settings

            self.client = LLMClient(load_settings())

    def _propose(self, n: int, history: History) -> list[Any]:
        from kernelpilot.llm.structured import extract_json

        reply = self.client.chat(build_prompt(self.space, history, n, self.device))
        try:
            data = extract_json(reply)
        except ValueError:
            history.invalid.append({"config": {"reply": reply[:200]}, "violations": ["reply is not JSON"]})
            return []
        raw_list = (
            data.get("configs", []) if isinstance(data, dict) else data if isinstance(data, list) else []
        )
        out: list[Any] = []
        for raw in raw_list:
            if not isinstance(raw, dict):
                continue
            try:
                cfg = self.space.model.parse_config(raw, "llm proposal")
            except Exception as exc:  # noqa: BLE001 - bad field names are an invalid proposal too
                history.invalid.append({"config": raw, "violations": [str(exc)]})
                continue
            check = self.space.check(cfg)
            if not check.valid:
                history.invalid.append(
                    {"config": raw, "violations": [f"{v.rule}: {v.message}" for v in check.violations]}
                )
                continue
            key = config_key(cfg)
            out.append(self.space.by_key.get(key, cfg))
        return out


class HybridProposer(Proposer):
    """LLM seeds the first batch; the cost model refines from then on (works if the LLM fails)."""

    name = "hybrid"

    def __init__(
        self, space: Any, seed: int = 0, *, device: Any = None, client: Any = None, **options: Any
    ) -> None:
        super().__init__(space, seed, device=device, **options)
        self._llm = LLMProposer(space, seed, device=device, client=client)
        self._model = ModelProposer(space, seed, device=device)
        self._seeded = False
        self.llm_error: str | None = None  # why the LLM seeding failed, if it did

    def _propose(self, n: int, history: History) -> list[Any]:
        if not self._seeded:
            self._seeded = True
            try:
                seeds = self._llm.propose(n, history)
            except LLMError as exc:  # documented: the hybrid proposer falls back on the cost model
                self.llm_error = redact(str(exc))
                log.warning(
                    "hybrid proposer: LLM failed (%s); the cost model proposes instead", self.llm_error
                )
                seeds = []
            if seeds:
                return seeds
        return self._model.propose(n, history)
