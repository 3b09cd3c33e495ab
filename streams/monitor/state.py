"""The monitor's state in a faust table (`monitor.state`, changelog-backed), row by row.

Rows, each written to the changelog partition of the input partition it belongs to (the three
input topics are co-partitioned by user, so a user's answers, acts and window counts travel
together through a rebalance):
- `r<request_id>`, `f<request_id>`: an open answer's response and logged features, as read;
- `i<event_id>`: a kept act, as read;
- `w<window key>`: a KPI window's counts for one partition, version and arm;
- `c<partition>`: the partition's clock: its sources' newest event times, the watermark and
  the bound of windows already reported.
A closed answer, a forgotten act and a reported window are deleted (a tombstone), so a restored
worker holds exactly the open state. Its watermark comes back with it: a record re-delivered
after a crash whose answer had closed is late, and a window already reported stays reported.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable
from typing import Protocol

from schemas.events import InteractionEvent
from schemas.ranker_examples import ServedFeatures
from schemas.recommendations import RecommendationResponse
from schemas.wire import decode
from streams.monitor.pipeline import MonitorPipeline, Published
from streams.monitor.windows import Counts, WindowKey

logger = logging.getLogger(__name__)


class Rows(Protocol):
    """The table the rows live in (streams.kafka.faust_app.StateTable)."""

    def put(self, partition: int, key: bytes, value: bytes) -> None: ...

    def delete(self, partition: int, key: bytes) -> None: ...

    def items(self) -> Iterable[tuple[int, bytes, bytes]]: ...


def _window_key(key: WindowKey) -> bytes:
    return b"w" + json.dumps(key).encode()


class MonitorState:
    def __init__(self, rows: Rows) -> None:
        self.rows = rows

    def response(self, partition: int, request_id: str, raw: bytes) -> None:
        self.rows.put(partition, b"r" + request_id.encode(), raw)

    def features(self, partition: int, request_id: str, raw: bytes) -> None:
        self.rows.put(partition, b"f" + request_id.encode(), raw)

    def act(self, partition: int, event_id: str, raw: bytes) -> None:
        self.rows.put(partition, b"i" + event_id.encode(), raw)

    def advanced(
        self, pipeline: MonitorPipeline, published: Published, sources: dict[int, list[str]],
        wall: float,
    ) -> None:
        """Persist what `advance` changed, and each partition's clock."""
        for answer in published.closed:
            self.rows.delete(answer.partition, b"r" + answer.request_id.encode())
            self.rows.delete(answer.partition, b"f" + answer.request_id.encode())
        for acted in pipeline.join.forgotten:
            self.rows.delete(acted.partition, b"i" + acted.event_id.encode())
        pipeline.join.forgotten.clear()
        windows = pipeline.windows
        for key in windows.touched:
            counts = windows.counts(key)
            if counts is None:
                self.rows.delete(key[0], _window_key(key))
            else:
                self.rows.put(key[0], _window_key(key), counts.to_json())
        windows.touched.clear()
        clock = {
            "watermark": _finite(pipeline.clock.watermark(wall)),
            "reported_through": _finite(pipeline.reported_through),
        }
        for partition, names in sources.items():
            newest = {name: pipeline.clock.newest(name) for name in names}
            row = {**clock, "newest": {n: t for n, t in newest.items() if t is not None}}
            self.rows.put(partition, b"c" + str(partition).encode(), json.dumps(row).encode())

    def restore(self, pipeline: MonitorPipeline, wall: float) -> int:
        """Load every row this worker holds into a fresh `pipeline`; returns how many."""
        rows = sorted(self.rows.items(), key=lambda row: row[1][:1] != b"c")  # clocks first
        for partition, key, value in rows:
            try:
                self._load(pipeline, wall, partition, key, value)
            except ValueError as error:  # a row a newer contract refuses: not worth a crash
                logger.warning("state row skipped partition=%d kind=%r error=%s",
                               partition, key[:1], error)
        return len(rows)

    @staticmethod
    def _load(
        pipeline: MonitorPipeline, wall: float, partition: int, key: bytes, value: bytes
    ) -> None:
        kind = key[:1]
        if kind == b"c":
            row = json.loads(value)
            pipeline.clock.restore(row["watermark"] if row["watermark"] is not None
                                   else -math.inf)
            if row["reported_through"] is not None:
                pipeline.resume_after(row["reported_through"])
            for name, newest in row["newest"].items():
                pipeline.clock.observe(newest, wall, name)
        elif kind == b"w":
            p, start, version, experiment, arm = json.loads(key[1:])
            pipeline.windows.restore((p, start, version, experiment, arm),
                                     Counts.from_json(value))
        elif kind == b"r":
            pipeline.join.add_response(decode(RecommendationResponse, value), partition)
        elif kind == b"f":
            pipeline.join.add_features(decode(ServedFeatures, value), partition)
        elif kind == b"i":
            pipeline.join.add_interaction(decode(InteractionEvent, value), -math.inf,
                                          partition)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
