"""Which offsets the monitor may commit: only those whose records no longer hold state.

The monitor's side effects (KPI reports) come long after its inputs: a response counts only once
its window has been reported. Committing a batch right after reading it would lose those
responses on a crash, so each partition's commit position stops at the first record whose event
time is at or after the `horizon`, the oldest event time the join and the windows still need.
After a crash the monitor re-reads from there and rebuilds its state. Commits carry the bound
of the windows already reported (`reported_through`), so a restarted monitor drops re-read
outcomes of reported windows instead of reporting them again, partially.
"""

from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import dataclass

from confluent_kafka import TopicPartition

Position = tuple[str, int]


@dataclass
class _Segment:
    first_offset: int
    next_offset: int
    newest_event_time: float


class CommitTracker:
    def __init__(self) -> None:
        self._segments: dict[Position, deque[_Segment]] = {}
        self._committable: dict[Position, int] = {}
        self._committed: dict[Position, int] = {}
        self._sealed: set[Position] = set()

    def track(self, topic: str, partition: int, offset: int, event_time: float) -> None:
        """Record one processed record; `-inf` for records that hold no state (invalid, late)."""
        position = (topic, partition)
        segments = self._segments.setdefault(position, deque())
        last = segments[-1] if segments else None
        if last is not None and position not in self._sealed and last.next_offset == offset:
            # One segment per partition and batch: memory grows with batches, not records.
            last.next_offset = offset + 1
            last.newest_event_time = max(last.newest_event_time, event_time)
            return
        self._sealed.discard(position)
        segments.append(_Segment(offset, offset + 1, event_time))

    def seal(self) -> None:
        """End the current segments (once per batch) so older batches can be released first."""
        self._sealed.update(self._segments)

    def release(
        self, horizon: float, everything: bool = False, metadata: str = ""
    ) -> list[TopicPartition]:
        """Positions safe to commit given the state's `horizon`: those that advanced, or every
        known one with `everything` (to refresh the `metadata` stored with the commits)."""
        result = []
        for position, segments in self._segments.items():
            while segments and segments[0].newest_event_time < horizon:
                self._committable[position] = segments.popleft().next_offset
            # Where a restart must resume: the first record still holding state, else past all.
            offset = segments[0].first_offset if segments else self._committable.get(position)
            if offset is not None and (everything or offset != self._committed.get(position)):
                result.append(
                    TopicPartition(position[0], position[1], offset, metadata=metadata)
                )
        return sorted(result, key=lambda tp: (tp.topic, tp.partition))

    def committed(self, offsets: list[TopicPartition]) -> None:
        for tp in offsets:
            self._committed[(tp.topic, tp.partition)] = tp.offset

    def forget(self, topic: str, partition: int) -> None:
        """Drop a revoked partition: its next owner resumes from the last committed offset."""
        self._segments.pop((topic, partition), None)
        self._committable.pop((topic, partition), None)
        self._committed.pop((topic, partition), None)
        self._sealed.discard((topic, partition))


def commit_metadata(reported_through: float) -> str:
    return json.dumps({"reported_through": reported_through})


def reported_through(committed: list[TopicPartition]) -> float:
    """The newest bound found in committed metadata (-inf when none carries one)."""
    bounds = [-math.inf]
    for tp in committed:
        try:
            bounds.append(float(json.loads(tp.metadata or "{}")["reported_through"]))
        except (ValueError, KeyError, TypeError):
            continue  # no metadata, or written by something else: start without a bound
    return max(bounds)
