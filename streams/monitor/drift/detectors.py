"""Change detection on a KPI indicator stream (1.0 = the response was a hit, 0.0 = not) with ADWIN.

ADWIN keeps an adaptive window and cuts its older part when the two parts' means differ beyond a
Hoeffding-style bound set by `delta`; its false-alarm bound holds for any stationary stream,
with no per-stream threshold to tune (Page-Hinkley's lambda depends on the KPI's scale and
variance). On a cut, the change point is estimated over ADWIN's window (two-sample CUSUM), which
dates the drop for the rollback decision and gives honest before/after levels. ADWIN reacts to
rises too; only drops are reported.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from river.drift import ADWIN

from streams.monitor.drift.config import DriftSettings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class KpiDrop:
    """A significant decrease of one KPI: `baseline` before the change, `current` after it."""

    metric: str
    baseline: float
    current: float
    started_at: float
    """Event time of the first observation in the new (lower) regime."""
    detected_at: float
    observations_since_change: int

    @property
    def relative_drop(self) -> float:
        return 0.0 if self.baseline <= 0.0 else (self.baseline - self.current) / self.baseline


class KpiDropDetector:
    """One metric's ADWIN plus the event times needed to date a change; memory is bounded."""

    def __init__(self, metric: str, settings: DriftSettings) -> None:
        self.metric = metric
        self._settings = settings
        self._adwin = ADWIN(  # type: ignore[no-untyped-call]  # river ships no annotations here
            delta=settings.adwin_delta, clock=settings.adwin_clock
        )
        self._values: deque[float] = deque(maxlen=settings.change_point_memory)
        self._times: deque[float] = deque(maxlen=settings.change_point_memory)
        self.updates = 0
        self.cuts = 0

    @property
    def estimate(self) -> float:
        return float(self._adwin.estimation)

    def update(self, value: float, at: float) -> KpiDrop | None:
        """Feed one observation (in event-time order); returns a drop when ADWIN cuts and the
        level after the estimated change point is lower than before it."""
        width_before = int(self._adwin.width)
        self._adwin.update(value)  # type: ignore[no-untyped-call]
        self._values.append(value)
        self._times.append(at)
        self.updates += 1
        if not self._adwin.drift_detected:
            return None
        self.cuts += 1
        # River's ADWIN drops only part of the old window per cut, so its new width does not
        # locate the change; estimate it over the window ADWIN had before the cut.
        span = min(width_before + 1, len(self._values))
        recent = list(itertools.islice(self._values, len(self._values) - span, None))
        split = change_point(recent)
        before, after = recent[:split], recent[split:]
        drop = KpiDrop(
            metric=self.metric,
            baseline=math.fsum(before) / len(before),
            current=math.fsum(after) / len(after),
            started_at=self._times[len(self._times) - len(after)],
            detected_at=at,
            observations_since_change=len(after),
        )
        if drop.relative_drop < self._settings.min_relative_drop:
            logger.debug(
                "kpi change ignored metric=%s baseline=%.4f current=%.4f",
                self.metric, drop.baseline, drop.current,
            )
            return None
        return drop


def change_point(values: Sequence[float], min_segment: int = 5) -> int:
    """Index splitting `values` into the two segments whose means differ most significantly
    (the CUSUM / two-sample statistic |mean_a - mean_b| * sqrt(n_a * n_b / n))."""
    n = len(values)
    if n < 2 * min_segment:
        return n // 2
    total = math.fsum(values)
    best, best_split, prefix = -1.0, n // 2, 0.0
    for i, value in enumerate(values[:-min_segment], start=1):
        prefix += value
        if i < min_segment:
            continue
        left, right = prefix / i, (total - prefix) / (n - i)
        score = abs(left - right) * math.sqrt(i * (n - i) / n)
        if score > best:
            best, best_split = score, i
    return best_split
