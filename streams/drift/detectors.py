"""Change detection on a KPI indicator stream (1.0 = the response was a hit, 0.0 = not) with ADWIN.

ADWIN keeps an adaptive window and cuts its older part when the two parts' means differ beyond a
Hoeffding-style bound set by `delta`. We use ADWIN rather than Page-Hinkley because the cut tells
us where the change began (the new window's width), which the rollback decision needs, and the
dropped part's mean is an honest baseline. ADWIN reacts to rises too; only drops are reported.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

from river.drift import ADWIN

from streams.drift.config import DriftSettings

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
        self._adwin = ADWIN(delta=settings.adwin_delta, clock=settings.adwin_clock)
        self._times: deque[float] = deque(maxlen=settings.change_point_memory)
        self.updates = 0
        self.cuts = 0

    @property
    def estimate(self) -> float:
        return float(self._adwin.estimation)

    def update(self, value: float, at: float) -> KpiDrop | None:
        """Feed one observation (in event-time order); returns a drop when ADWIN cuts downwards."""
        width_before = int(self._adwin.width)
        total_before = float(self._adwin.estimation) * width_before
        self._adwin.update(value)
        self._times.append(at)
        self.updates += 1
        if not self._adwin.drift_detected:
            return None
        self.cuts += 1
        width_after = int(self._adwin.width)
        current = float(self._adwin.estimation)
        dropped = width_before + 1 - width_after
        if dropped <= 0:
            return None
        # Exact mean of the sub-window ADWIN discarded: everything seen minus what it kept.
        baseline = (total_before + value - current * width_after) / dropped
        drop = KpiDrop(
            metric=self.metric,
            baseline=baseline,
            current=current,
            started_at=self._times[-min(width_after, len(self._times))],
            detected_at=at,
            observations_since_change=width_after,
        )
        if drop.relative_drop < self._settings.min_relative_drop:
            logger.debug(
                "kpi change ignored metric=%s baseline=%.4f current=%.4f",
                self.metric, baseline, current,
            )
            return None
        return drop
