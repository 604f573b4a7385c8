"""Confirmation: re-measure the finalists of a search, interleaved with the vendor baseline.

Why: the search reports the best of many noisy medians, a maximum that is biased upward (a config that
was lucky once is more likely to be the "best"), and it never measures what the user would otherwise
call.  So when the search stops, the top ``finalists`` configs (each with its best run-time variant)
plus the library default are run again in fresh program runs for ``rounds`` rounds.  Every round runs
every contender once, the vendor baseline included, and the starting contender rotates from round to
round, so slow drift of the GPU (clocks, temperature) spreads over all contenders instead of favouring
the one that ran first.  The reported winner is the best *confirmed* median (the median of the
per-round medians); the per-round spread ``(max - min) / median`` above ``unstable_spread`` (3 %)
marks a contender as unstable.  When the leading finalist or the vendor is unstable after ``rounds``,
``extra_rounds`` more interleaved rounds (default: as many again) run for every contender before the
winner is named: a median of few wide-spread rounds is itself a lucky draw, and the run's confirmed
time is what the exported operators and the vendor ratio are later held to.

Under ``--replay`` nothing is re-measured: the recorded store holds one median per config, so a
"confirmation" would only repeat the number the search already used.  The run then says that
confirmation is not possible and keeps the search-time winner, marked unconfirmed.

This module is generic; the vendor baseline comes from the tile kernel (:mod:`.baseline`).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernelpilot.errors import InputError
from kernelpilot.tile_tuner.baseline import MeasureResult, VendorPlan
from kernelpilot.tile_tuner.kernel_api import implausible

UNSTABLE_SPREAD = 0.03


@dataclass(frozen=True)
class ConfirmOptions:
    """``--finalists N`` (0: no confirmation), ``--confirm-rounds R``, ``--confirm-extra-rounds E``
    (None: as many as R; 0: never), ``--no-baseline``."""

    finalists: int = 3
    rounds: int = 3
    baseline: bool = True
    unstable_spread: float = UNSTABLE_SPREAD
    extra_rounds: int | None = None

    @property
    def extra(self) -> int:
        """Rounds added when the leader or the vendor is unstable after ``rounds``."""
        return self.rounds if self.extra_rounds is None else self.extra_rounds

    def validate(self) -> ConfirmOptions:
        if isinstance(self.finalists, bool) or not isinstance(self.finalists, int) or self.finalists < 0:
            raise InputError(f"must be an integer >= 0 (0 skips confirmation), got {self.finalists!r}",
                             field="--finalists")  # fmt: skip
        if isinstance(self.rounds, bool) or not isinstance(self.rounds, int) or self.rounds < 1:
            raise InputError(f"must be an integer >= 1, got {self.rounds!r}", field="--confirm-rounds")
        extra = self.extra_rounds
        if extra is not None and (isinstance(extra, bool) or not isinstance(extra, int) or extra < 0):
            raise InputError(f"must be an integer >= 0 (0: never add rounds), got {extra!r}",
                             field="--confirm-extra-rounds")  # fmt: skip
        return self


@dataclass
class Contender:
    """One thing measured in every round: a finalist config, the library default, or the vendor."""

    label: str
    role: str  # finalist | default | vendor
    run: Callable[[], MeasureResult]
    search_ms: float | None = None
    config: dict[str, Any] | None = None
    runtime: dict[str, Any] | None = None
    rounds_ms: list[float | None] = field(default_factory=list)
    status: str = "ok"
    reason: str = ""
    last_raw: dict[str, Any] | None = None
    run_s: float = 0.0


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def run_rounds(contenders: list[Contender], rounds: int, first_round: int = 0) -> list[dict[str, Any]]:
    """Run every contender once per round, rotating the start; returns the call log in call order.
    ``first_round`` numbers (and rotates) rounds added after earlier ones.

    A contender that fails once (wrong result, crash, timeout) keeps its failure and is not run again:
    a config that cannot reproduce its search result is no winner."""
    calls: list[dict[str, Any]] = []
    n = len(contenders)
    for r in range(first_round, first_round + rounds):
        for i in range(n):
            c = contenders[(r + i) % n]
            if c.status != "ok":
                continue
            status, reason, raw, seconds = c.run()
            c.run_s += seconds
            bad = implausible(raw or {}) if status == "ok" else None
            if bad is not None:  # a zero/NaN time or failed verification never confirms anything
                status, reason = bad
            ms = None
            if status == "ok" and raw and raw.get("time_ms"):
                ms = float(raw["time_ms"]["median"])
                c.last_raw = raw
            else:
                c.status, c.reason = (status if status != "ok" else "crashed"), reason or "no time reported"
            c.rounds_ms.append(ms)
            calls.append({"round": r, "label": c.label, "role": c.role, "status": status,
                          "time_ms": ms, "seconds": round(seconds, 3)})  # fmt: skip
    return calls


def contender_summary(c: Contender, unstable_spread: float) -> dict[str, Any]:
    times = [t for t in c.rounds_ms if t is not None]
    confirmed = median(times) if c.status == "ok" and times else None
    spread = (max(times) - min(times)) / confirmed if confirmed else None
    out: dict[str, Any] = {
        "label": c.label,
        "role": c.role,
        "status": c.status,
        "reason": c.reason,
        "search_ms": c.search_ms,
        "rounds_ms": c.rounds_ms,
        "confirmed_ms": confirmed,
        "spread": spread,
        "unstable": spread is not None and spread > unstable_spread,
        "run_s": round(c.run_s, 3),
    }
    if c.config is not None:
        out["config"] = c.config
    if c.runtime is not None:
        out["runtime"] = c.runtime
    return out


def vendor_summary(plan: VendorPlan, c: Contender | None, unstable_spread: float) -> dict[str, Any]:
    """What the run says about the vendor path: numbers, backend and versions, or why it did not run."""
    if c is None:
        return {"name": plan.name, "status": "not_run", "reason": plan.reason}
    out = contender_summary(c, unstable_spread)
    out["name"] = plan.name
    raw = c.last_raw or {}
    for key in ("backend", "versions", "candidates", "timing"):
        if key in raw:
            out[key] = raw[key]
    if c.status != "ok":
        out["reason"] = c.reason
    return out


def verdict(winner: dict[str, Any] | None, vendor: dict[str, Any] | None, confirmed: bool) -> str:
    """One plain sentence comparing the winner with the vendor library (a slower winner is a result)."""
    if winner is None:
        return "no config ran successfully"
    w = winner.get("confirmed_ms") or winner.get("search_ms")
    if not vendor or not vendor.get("confirmed_ms"):
        why = (vendor or {}).get("reason") or "not measured"
        return f"no vendor baseline to compare with ({why})"
    v = vendor["confirmed_ms"]
    name = vendor.get("backend") or vendor.get("name")
    basis = "confirmed" if confirmed else "search-time (unconfirmed)"
    if w > v:
        return (f"the {basis} winner {winner['label']} ({w:.4g} ms) is SLOWER than the vendor library "
                f"{name} ({v:.4g} ms): {w / v:.3f}x the vendor's time; use the vendor library here")  # fmt: skip
    return f"the {basis} winner {winner['label']} ({w:.4g} ms) is {v / w:.3f}x as fast as {name} ({v:.4g} ms)"


def confirm(
    finalists: list[Contender],
    plan: VendorPlan | None,
    vendor_run: Callable[[], MeasureResult] | None,
    options: ConfirmOptions,
) -> dict[str, Any]:
    """Interleaved rounds over ``finalists`` (+ the vendor when ``plan`` is runnable); the document
    ``run.json`` keeps per workload under ``confirmation``."""
    contenders = list(finalists)
    vendor_c: Contender | None = None
    if plan is not None and plan.runnable and vendor_run is not None:
        vendor_c = Contender(label=plan.name, role="vendor", run=vendor_run)
        contenders.append(vendor_c)
    calls = run_rounds(contenders, options.rounds) if contenders else []
    rows, winner, vendor = _standings(finalists, plan, vendor_c, options)
    shaky = [r["label"] for r in (winner, vendor if vendor_c else None) if r and r.get("unstable")]
    extra = options.extra if shaky else 0
    if extra:
        calls += run_rounds(contenders, extra, first_round=options.rounds)
        rows, winner, vendor = _standings(finalists, plan, vendor_c, options)
    search_best = min((r for r in rows if r["search_ms"]), key=lambda r: r["search_ms"], default=None)
    return {
        "status": "confirmed" if finalists else ("baseline_only" if vendor_c else "skipped"),
        "reason": "" if finalists else "--finalists 0: the search-time winner is reported unconfirmed",
        "rounds": options.rounds + extra,
        "extra_rounds": {"run": extra, "because_unstable": shaky},
        "unstable_spread": options.unstable_spread,
        "finalists": rows,
        "winner": winner,
        "winner_changed": bool(
            winner is not None and search_best is not None and winner["label"] != search_best["label"]
        ),
        "vendor": vendor,
        "calls": calls,
        "unstable": [
            r["label"]
            for r in [*rows, *([vendor] if vendor_c and vendor is not None else [])]
            if r.get("unstable")
        ],
    }


def _standings(
    finalists: list[Contender], plan: VendorPlan | None, vendor_c: Contender | None, options: ConfirmOptions
) -> tuple[list[dict[str, Any]], dict[str, Any] | None, dict[str, Any] | None]:
    """Finalist rows, the winner (best confirmed median) and the vendor row, from the rounds so far."""
    rows = [contender_summary(c, options.unstable_spread) for c in finalists]
    ok = [r for r in rows if r["confirmed_ms"] is not None]
    winner = min(ok, key=lambda r: r["confirmed_ms"]) if ok else None
    vendor = vendor_summary(plan, vendor_c, options.unstable_spread) if plan is not None else None
    return rows, winner, vendor


def not_possible(reason: str, vendor_reason: str) -> dict[str, Any]:
    """The confirmation record when nothing can be re-measured (replay, a remote cluster)."""
    vendor = {"name": "none", "status": "not_run", "reason": vendor_reason}
    return {"status": "not_possible", "reason": reason, "finalists": [], "winner": None,
            "winner_changed": False, "vendor": vendor, "calls": [], "unstable": []}  # fmt: skip
