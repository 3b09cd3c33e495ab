"""Event time for the monitor: a watermark from the newest record seen, minus allowed lateness.

Both input topics and all their partitions feed one clock. When nothing arrives for
`idle_advance_s`, event time is assumed to move with the wall clock, so the last windows still
close when traffic stops (a replay of history is never idle, so it is not affected).
"""

from __future__ import annotations

import math


class EventClock:
    def __init__(self, allowed_lateness_s: float, idle_advance_s: float) -> None:
        self._lateness = allowed_lateness_s
        self._idle_after = idle_advance_s
        self._newest = -math.inf
        self._last_arrival_wall = -math.inf
        self._watermark = -math.inf

    @property
    def newest(self) -> float:
        return self._newest

    def observe(self, event_time: float, wall: float) -> None:
        self._newest = max(self._newest, event_time)
        self._last_arrival_wall = wall

    def watermark(self, wall: float) -> float:
        """Event time before which no more records are expected; never moves backwards."""
        candidate = self._newest - self._lateness
        idle = wall - self._last_arrival_wall
        if math.isfinite(candidate) and idle > self._idle_after:
            candidate += idle - self._idle_after
        self._watermark = max(self._watermark, candidate)
        return self._watermark
