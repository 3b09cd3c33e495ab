"""Freshness lag: a p95 over a sample of responses, judged by a threshold with hysteresis.

Hysteresis (raise above `high` for `consecutive` evaluations, clear only below `low`) keeps a
value hovering at the threshold from flapping between raised and cleared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Transition = Literal["raised", "cleared"]


@dataclass
class HysteresisGuard:
    high: float
    low: float
    consecutive: int = 1
    raised: bool = False
    _above: int = 0

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError("low must be <= high")

    def update(self, value: float) -> Transition | None:
        if not self.raised:
            self._above = self._above + 1 if value > self.high else 0
            if self._above >= self.consecutive:
                self.raised, self._above = True, 0
                return "raised"
            return None
        if value < self.low:
            self.raised = False
            return "cleared"
        return None


class SampleQuantile:
    """Collects up to `size` values, then yields their quantile and starts a new sample."""

    def __init__(self, size: int, q: float = 0.95) -> None:
        if size < 1 or not 0.0 <= q <= 1.0:
            raise ValueError("size must be >= 1 and q in [0, 1]")
        self._size = size
        self._q = q
        self._values: list[float] = []

    def add(self, value: float) -> float | None:
        self._values.append(value)
        if len(self._values) < self._size:
            return None
        ordered = sorted(self._values)
        self._values = []
        rank = max(0, math.ceil(self._q * len(ordered)) - 1)
        return ordered[rank]
