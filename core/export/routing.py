"""Which tuned shapes the exported operators serve with their kernel, and which with the vendor library.

A run that confirmed its winners re-measured each one side by side with the vendor library (cuBLAS,
SDPA, grouped_mm).  Where the vendor library was the faster of the two, calling the tuned kernel would
make the user's model slower than what it already had, so the exported operator calls the vendor
library on that shape (the row stays in the table, with the reason).  Only a *confirmed* ratio decides:
search-time medians were not measured against the vendor side by side, and a number that was never
measured is not invented.
"""

from __future__ import annotations

import math
from typing import Any

from kernelpilot.errors import InputError
from kernelpilot.export.runs import TunedEntry

#: a tuned kernel serves its shape when vendor time / tuned time is at least this
DEFAULT_MIN_VENDOR_RATIO = 1.0


def check_min_vendor_ratio(value: float) -> float:
    """``--min-vendor-ratio``: a finite number >= 0 (0 keeps every tuned kernel)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise InputError(
            f"min vendor ratio {value!r} must be a finite number >= 0 (1.0: the vendor library serves the "
            "shapes where the run measured it faster; 0: every tuned kernel is kept)",
            field="--min-vendor-ratio",
        )
    return float(value)


def vendor_reason(entry: TunedEntry, min_ratio: float) -> str | None:
    """Why ``entry``'s shape goes to the vendor library instead of its tuned kernel, or None."""
    if entry.time_source != "confirmed" or entry.vendor_ratio is None or entry.vendor_ratio >= min_ratio:
        return None
    return (
        f"the run's confirmation measured the vendor library faster: vendor/tuned = {entry.vendor_ratio:.3f} "
        f"< {min_ratio:g} (--min-vendor-ratio)"
    )


class RoutedRow:
    """What every kind's table row shares: ``kernel`` (None when the vendor library serves the row) and
    its index in the generated C++ tables, -1 meaning "the vendor library" there."""

    kernel: Any

    @property
    def kernel_index(self) -> int:
        """The row's kernel in the generated tables; -1 for a vendor-served row."""
        return -1 if self.kernel is None else self.kernel.index


def route_fields(kernel: Any, label: str, reason: str | None, config: dict[str, Any]) -> dict[str, Any]:
    """The routing part of a ``dispatch.json`` row, the same for every kind; a vendor-served row keeps
    the config that was tuned (``tuned_config``: no kernel of the export carries it)."""
    fields = {
        "route": "vendor" if reason else "kernel",
        "kernel": None if reason else kernel.symbol,
        "label": label,
        "route_reason": reason,
    }
    if reason:
        fields["tuned_config"] = config
    return fields
