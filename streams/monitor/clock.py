"""Event time for the monitor: a watermark over all input partitions, minus allowed lateness.

Each source (a topic-partition) advances at its own pace: after a restart one partition may be
replayed far ahead of another. The watermark is therefore the *minimum* over sources of the
newest event time each has delivered (as in Flink), so a fast partition cannot make a slow one's
records late. A source silent for `idle_advance_s` stops holding the watermark back; when every
source is silent, event time is assumed to move with the wall clock, so the last windows still
close when traffic stops (a replay of history is never idle, so it is not affected).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_SOURCE = "default"


@dataclass
class _Source:
    newest: float
    last_arrival_wall: float


class EventClock:
    def __init__(self, allowed_lateness_s: float, idle_advance_s: float) -> None:
        self._lateness = allowed_lateness_s
        self._idle_after = idle_advance_s
        self._sources: dict[str, _Source] = {}
        self._watermark = -math.inf

    def register(self, source: str, wall: float) -> None:
        """A source now read here (an assigned partition): until it delivers a record or falls
        idle, it holds the watermark back, so its first records cannot arrive late."""
        self._sources.setdefault(source, _Source(-math.inf, wall))

    def observe(self, event_time: float, wall: float, source: str = DEFAULT_SOURCE) -> None:
        known = self._sources.get(source)
        if known is None:
            self._sources[source] = _Source(event_time, wall)
        else:
            known.newest = max(known.newest, event_time)
            known.last_arrival_wall = wall

    def forget(self, source: str) -> None:
        """A source no longer read here (a revoked partition) stops holding the watermark."""
        self._sources.pop(source, None)

    def watermark(self, wall: float) -> float:
        """Event time before which no more records are expected; never moves backwards."""
        candidate = self._candidate(wall) if self._sources else -math.inf
        if math.isfinite(candidate):
            self._watermark = max(self._watermark, candidate - self._lateness)
        return self._watermark

    def _candidate(self, wall: float) -> float:
        sources = self._sources.values()
        active = [s.newest for s in sources if wall - s.last_arrival_wall <= self._idle_after]
        if active:
            return min(active)
        newest = max(s.newest for s in sources)
        if not math.isfinite(newest):
            return newest
        idle = wall - max(s.last_arrival_wall for s in sources)
        return newest + idle - self._idle_after
