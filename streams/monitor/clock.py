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
    """The candidate (the event time the watermark trails by the allowed lateness) depends on
    the wall clock only through which sources count as active; the monitor reads it once per
    record at one wall time per batch, so it is kept for that wall time with the slowest active
    source and a bound at or below every other active source's newest time. The slowest source
    moving on up to that bound moves the candidate with it; it is recomputed only when a record
    may have changed it otherwise (a new source, the slowest passing the bound)."""

    def __init__(self, allowed_lateness_s: float, idle_advance_s: float) -> None:
        self._lateness = allowed_lateness_s
        self._idle_after = idle_advance_s
        self._sources: dict[str, _Source] = {}
        self._watermark = -math.inf
        self._kept: tuple[float, float, _Source | None, float] | None = None
        """(wall, candidate from the sources active at that wall time, the source it is the
        newest time of, a bound at or below every other active source's newest time)."""

    def register(self, source: str, wall: float) -> None:
        """A source now read here (an assigned partition): until it delivers a record or falls
        idle, it holds the watermark back, so its first records cannot arrive late."""
        if source not in self._sources:
            self._sources[source] = _Source(-math.inf, wall)
            self._kept = None

    def observe(self, event_time: float, wall: float, source: str = DEFAULT_SOURCE) -> None:
        known = self._sources.get(source)
        if known is None:
            self._sources[source] = _Source(event_time, wall)
            self._kept = None
            return
        was_active = wall - known.last_arrival_wall <= self._idle_after
        before = known.newest
        if event_time > before:
            known.newest = event_time
        known.last_arrival_wall = wall
        kept = self._kept
        if kept is None:
            return
        wall_of, candidate, slowest, bound = kept
        newest = known.newest
        if wall_of != wall:
            self._kept = None
        elif not was_active:  # one more active source
            if newest < candidate:
                self._kept = (wall, newest, known, candidate)
            else:
                self._kept = (wall, candidate, slowest, min(bound, newest))
        elif known is slowest and newest != before:
            self._kept = (wall, newest, known, bound) if newest <= bound else None

    def restore(self, watermark: float) -> None:
        """After a restart: the watermark the previous owner of these sources had reached."""
        self._watermark = max(self._watermark, watermark)

    def newest(self, source: str) -> float | None:
        known = self._sources.get(source)
        return None if known is None or not math.isfinite(known.newest) else known.newest

    def sources_of(self, partition: int) -> list[str]:
        """The sources named `<topic>:<partition>` for this partition."""
        suffix = f":{partition}"
        return [name for name in self._sources if name.endswith(suffix)]

    def forget(self, source: str) -> None:
        """A source no longer read here (a revoked partition) stops holding the watermark."""
        self._sources.pop(source, None)
        self._kept = None

    def watermark(self, wall: float) -> float:
        """Event time before which no more records are expected; never moves backwards."""
        kept = self._kept
        if kept is not None and kept[0] == wall:
            candidate = kept[1]
        else:
            candidate = self._candidate(wall) if self._sources else -math.inf
        if math.isfinite(candidate):
            self._watermark = max(self._watermark, candidate - self._lateness)
        return self._watermark

    def _candidate(self, wall: float) -> float:
        sources = self._sources.values()
        idle_after = self._idle_after
        slowest: _Source | None = None
        candidate = bound = math.inf
        for source in sources:
            if wall - source.last_arrival_wall > idle_after:
                continue
            newest = source.newest
            if slowest is None or newest < candidate:
                if slowest is not None:
                    bound = candidate
                slowest, candidate = source, newest
            elif newest < bound:
                bound = newest
        if slowest is not None:
            self._kept = (wall, candidate, slowest, bound)
            return candidate
        newest = max(s.newest for s in sources)
        if not math.isfinite(newest):
            return newest
        idle = wall - max(s.last_arrival_wall for s in sources)
        return newest + idle - self._idle_after
