"""Population stability index between two histograms over the same bins (a pure function).

PSI = sum_i (c_i - r_i) * ln(c_i / r_i) over bin proportions r (reference) and c (current).
Rules of thumb: < 0.1 stable, 0.1-0.25 moderate shift, > 0.25 major shift.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

DEFAULT_EPSILON = 1e-4
"""Floor for empty-bin proportions: an empty bin would make ln(c/r) infinite."""


def proportions(counts: Sequence[float], epsilon: float = DEFAULT_EPSILON) -> list[float]:
    total = float(sum(counts))
    if total <= 0.0:
        raise ValueError("a histogram needs at least one observation")
    if any(c < 0 for c in counts):
        raise ValueError("histogram counts must be non-negative")
    floored = [max(c / total, epsilon) for c in counts]
    norm = sum(floored)
    return [p / norm for p in floored]


def population_stability_index(
    reference: Sequence[float], current: Sequence[float], epsilon: float = DEFAULT_EPSILON
) -> float:
    """PSI of `current` against `reference`; both are counts (or proportions) over the same bins."""
    if len(reference) != len(current):
        raise ValueError(f"bin counts differ: reference {len(reference)}, current {len(current)}")
    if not reference:
        raise ValueError("histograms need at least one bin")
    ref = proportions(reference, epsilon)
    cur = proportions(current, epsilon)
    return math.fsum((c - r) * math.log(c / r) for r, c in zip(ref, cur, strict=True))
