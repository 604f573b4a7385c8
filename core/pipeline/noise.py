"""Measurement noise: how much faster a candidate must be before the pipeline believes it.

The baseline is timed ``repeats`` times (separate worker processes, separate inputs).  Each run gives a
median; the noise estimate is the relative spread of those medians, ``(max - min) / median``, which is
what a re-measurement of the *same* kernel can move by.  It is floored by ``MIN_NOISE`` (1 %, timer
resolution and clock jitter that two or three samples can under-estimate) and by the executor's own
floor (``timing_noise()``), and capped at ``MAX_NOISE`` (a 50 % spread means the machine is busy, and
we would rather report it than accept nothing).  A candidate is accepted when

    candidate_median < input_median * (1 - noise)

i.e. it must beat the stage's input by more than the spread observed between identical runs.
"""

from __future__ import annotations

import statistics

MIN_NOISE = 0.01
MAX_NOISE = 0.5


def estimate_noise(medians: list[float], executor_floor: float | None = None) -> float:
    floor = max(MIN_NOISE, executor_floor or 0.0)
    values = [m for m in medians if m and m > 0]
    if len(values) < 2:
        return floor
    center = statistics.median(values)
    spread = (max(values) - min(values)) / center
    return min(MAX_NOISE, max(floor, spread))


def is_faster(candidate_ms: float, reference_ms: float, noise: float) -> bool:
    return candidate_ms < reference_ms * (1.0 - noise)


def not_slower(candidate_ms: float, reference_ms: float, noise: float) -> bool:
    return candidate_ms <= reference_ms * (1.0 + noise)
