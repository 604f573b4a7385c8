"""One schema for counters from any profiler, and the short summary the prompts get."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# canonical metric name -> label in summaries (percentages unless the name says otherwise)
LABELS = {
    "sm_throughput_pct": "SM throughput",
    "dram_throughput_pct": "DRAM throughput",
    "achieved_occupancy_pct": "achieved occupancy",
    "l2_hit_rate_pct": "L2 hit rate",
    "xve_active_pct": "XVE active",
    "xve_stalled_pct": "XVE stalled",
    "xve_idle_pct": "XVE idle",
    "xve_occupancy_pct": "XVE threads occupancy",
    "l3_miss_pct": "L3 miss ratio",
    "lsc_miss_pct": "load/store cache miss ratio",
}


@dataclass
class KernelProfile:
    """Counters of one kernel (launches of the same name aggregated: times summed, ratios averaged)."""

    name: str
    launches: int = 0
    total_us: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)
    stalls: dict[str, float] = field(default_factory=dict)  # reason -> share of stall cycles, %

    @property
    def mean_us(self) -> float:
        return self.total_us / self.launches if self.launches else 0.0

    def top_stalls(self, n: int = 3) -> list[tuple[str, float]]:
        return sorted(self.stalls.items(), key=lambda kv: -kv[1])[:n]


@dataclass
class ProfileReport:
    tool: str  # "ncu" | "vtune"
    kernels: list[KernelProfile]
    command: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def primary(self) -> KernelProfile | None:
        """The kernel with the most total time (what an optimization should look at first)."""
        if not self.kernels:
            return None
        return max(self.kernels, key=lambda k: k.total_us)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["primary"] = self.primary.name if self.primary else None
        data["summary"] = self.summary()
        return data

    def summary(self) -> str:
        """A few lines for a prompt: the hottest kernel's counters, its top stalls, what they suggest."""
        top = self.primary
        if top is None:
            return f"{self.tool}: no kernel was captured"
        total = sum(k.total_us for k in self.kernels) or 1.0
        head = (
            f"{self.tool}: hottest kernel {top.name} ({top.launches} launch(es), {top.mean_us:.4g} us each, "
            f"{top.total_us / total:.0%} of GPU time)"
        )
        parts = [f"{LABELS[k]} {v:.0f}%" for k, v in top.metrics.items() if k in LABELS]
        if "registers_per_thread" in top.metrics:
            parts.append(f"{top.metrics['registers_per_thread']:.0f} registers/thread")
        for key, label in (("mem_read_gbs", "memory read"), ("mem_write_gbs", "memory write")):
            if key in top.metrics:
                parts.append(f"{label} {top.metrics[key]:.4g} GB/s")
        lines = [head]
        if parts:
            lines.append("- " + ", ".join(parts))
        if top.stalls:
            lines.append("- top stall reasons: " + ", ".join(f"{r} {s:.0f}%" for r, s in top.top_stalls()))
        lines += [f"- {hint}" for hint in diagnose(top)]
        if len(self.kernels) > 1:
            others = sorted((k for k in self.kernels if k is not top), key=lambda k: -k.total_us)[:3]
            lines.append(
                "- other kernels: " + ", ".join(f"{k.name} {k.total_us / total:.0%}" for k in others)
            )
        return "\n".join(lines)


STALL_MEANING = {
    "long_scoreboard": "waiting on global/local memory loads",
    "short_scoreboard": "waiting on shared memory or special-function results",
    "mio_throttle": "shared-memory instruction queue full",
    "lg_throttle": "too many global memory instructions in flight (use wider loads)",
    "math_pipe_throttle": "math pipe busy (compute-limited)",
    "barrier": "waiting at a barrier",
    "wait": "fixed-latency dependencies",
    "not_selected": "eligible but another warp issued (enough parallelism)",
    "dispatch_stall": "dispatch stalls",
    "no_instruction": "instruction cache misses",
    "membar": "memory barriers",
}


def diagnose(k: KernelProfile) -> list[str]:
    """Rule-of-thumb readings of the counters (thresholds are conventional, not tuned)."""
    m = k.metrics
    hints: list[str] = []
    sm, dram = m.get("sm_throughput_pct"), m.get("dram_throughput_pct")
    if sm is not None and dram is not None:
        if dram >= 60 and dram > sm:
            hints.append(
                "memory-bound: fewer bytes per result (fusion, lower precision, no re-reads) pays most"
            )
        elif sm >= 60:
            hints.append("compute-bound: tensor cores (tl.dot on fp16/bf16) and less arithmetic pay most")
        elif max(sm, dram) < 40:
            hints.append("latency-bound (neither SM nor DRAM busy): more parallel work or fewer serial steps")
    occ = m.get("achieved_occupancy_pct", m.get("xve_occupancy_pct"))
    if occ is not None and occ < 30:
        hints.append(f"low occupancy ({occ:.0f}%): registers or shared memory per program limit residency")
    active, stalled = m.get("xve_active_pct"), m.get("xve_stalled_pct")
    if active is not None and stalled is not None and stalled > active:
        hints.append("XVE stalled more than active: memory latency dominates")
    if m.get("xve_idle_pct", 0) > 30:
        hints.append("XVE idle > 30%: too few work-groups or a long tail")
    if m.get("l3_miss_pct", 0) > 50 or (m.get("l2_hit_rate_pct") is not None and m["l2_hit_rate_pct"] < 30):
        hints.append("poor cache reuse: tile/swizzle so neighbouring programs share data")
    if k.stalls:
        reason, share = k.top_stalls(1)[0]
        if reason in STALL_MEANING and share >= 25:
            hints.append(f"{reason} dominates ({STALL_MEANING[reason]})")
    return hints
