"""The monitor's state in a faust table (`monitor.state`, changelog-backed), partition by
partition.

The three input topics are co-partitioned by user, so a user's answers, acts and window counts
belong to one input partition and are written to the same changelog partition: they travel
together through a rebalance. Two kinds of rows, both written at most once per partition and
batch, so the changelog costs a few records per batch, not one per input record:
- `s<partition>:<worker>:<n>`, a segment: the records one batch kept for the join (responses,
  logged features, acts), as they were read. A segment is deleted (a tombstone) once every
  record in it has closed or been forgotten;
- `c<partition>`, the partition's clock: its sources' newest event times, its watermark, the
  bound of the windows already reported, and its open KPI windows' counts.
The clock row is written after the segments of its batch, so a restored partition is what the
last clock row says: its windows count exactly the answers that closed before its watermark,
and a segment's records whose window ended before that watermark (closed and counted) are not
joined again. A record re-delivered after a crash whose answer had closed is late, and a
window already reported stays reported.
"""

from __future__ import annotations

import json
import logging
import math
import uuid
from collections.abc import Iterable
from typing import Any, Protocol

import msgpack

from schemas.events import InteractionEvent
from schemas.ranker_examples import ServedFeatures
from schemas.recommendations import RecommendationResponse
from schemas.wire import decode
from streams.monitor.pipeline import MonitorPipeline, Published
from streams.monitor.windows import Counts

logger = logging.getLogger(__name__)

_RESPONSE, _FEATURES, _ACT = "r", "f", "i"
_SEGMENT_BYTES = 512 * 1024


class Rows(Protocol):
    """The table the rows live in (streams.kafka.faust_app.StateTable)."""

    def put(self, partition: int, key: bytes, value: bytes) -> None: ...

    def delete(self, partition: int, key: bytes) -> None: ...

    def items(self) -> Iterable[tuple[int, bytes, bytes]]: ...


RowId = tuple[str, str]
"""(kind, request or event id)"""


class MonitorState:
    def __init__(self, rows: Rows) -> None:
        self.rows = rows
        self._worker = uuid.uuid4().hex[:8]
        self._written = 0
        self._batch: dict[int, list[tuple[RowId, bytes]]] = {}
        self._segment_of: dict[RowId, bytes] = {}
        self._live: dict[bytes, int] = {}
        self._clock_rows: dict[int, bytes] = {}

    def response(self, partition: int, request_id: str, raw: bytes) -> None:
        self._keep(partition, (_RESPONSE, request_id), raw)

    def features(self, partition: int, request_id: str, raw: bytes) -> None:
        self._keep(partition, (_FEATURES, request_id), raw)

    def act(self, partition: int, event_id: str, raw: bytes) -> None:
        self._keep(partition, (_ACT, event_id), raw)

    def _keep(self, partition: int, row: RowId, raw: bytes) -> None:
        self._batch.setdefault(partition, []).append((row, raw))

    def advanced(
        self, pipeline: MonitorPipeline, published: Published, partitions: Iterable[int],
        wall: float,
    ) -> None:
        """Persist one batch: its segments, what closed, and each partition's clock."""
        for partition, kept in self._batch.items():
            self._write_segments(partition, kept)
        self._batch = {}
        for answer in published.closed:
            for kind in (_RESPONSE, _FEATURES):
                self._release(answer.partition, (kind, answer.request_id))
        for acted in pipeline.join.forgotten:
            self._release(acted.partition, (_ACT, acted.event_id))
        pipeline.join.forgotten.clear()
        self._write_clocks(pipeline, partitions, wall)

    def _write_segments(self, partition: int, kept: list[tuple[RowId, bytes]]) -> None:
        """One segment per `_SEGMENT_BYTES` of records (a record is at most the wire cap, so a
        segment stays below the broker's message limit)."""
        chunk: list[tuple[RowId, bytes]] = []
        size = 0
        for row, raw in kept:
            if chunk and size + len(raw) > _SEGMENT_BYTES:
                self._write_segment(partition, chunk)
                chunk, size = [], 0
            chunk.append((row, raw))
            size += len(raw)
        if chunk:
            self._write_segment(partition, chunk)

    def _write_segment(self, partition: int, chunk: list[tuple[RowId, bytes]]) -> None:
        key = f"s{partition}:{self._worker}:{self._written}".encode()
        self._written += 1
        self.rows.put(partition, key, msgpack.packb([(row[0], raw) for row, raw in chunk]))
        self._live[key] = len(chunk)
        for row, _ in chunk:
            self._segment_of[row] = key

    def _release(self, partition: int, row: RowId) -> None:
        segment = self._segment_of.pop(row, None)
        if segment is None:
            return
        self._live[segment] -= 1
        if self._live[segment] == 0:
            del self._live[segment]
            self.rows.delete(partition, segment)

    def _write_clocks(
        self, pipeline: MonitorPipeline, partitions: Iterable[int], wall: float
    ) -> None:
        watermark = _finite(pipeline.clock.watermark(wall))
        reported = _finite(pipeline.reported_through)
        windows: dict[int, list[Any]] = {}
        for key, counts in pipeline.windows.items():
            windows.setdefault(key[0], []).append([*key[1:], counts.to_dict()])
        for partition in partitions:
            newest = {
                name: t for name in pipeline.sources(partition)
                if (t := pipeline.clock.newest(name)) is not None
            }
            row = json.dumps({
                "watermark": watermark, "reported_through": reported, "newest": newest,
                "windows": windows.get(partition, []),
            }).encode()
            if self._clock_rows.get(partition) != row:
                self.rows.put(partition, b"c" + str(partition).encode(), row)
                self._clock_rows[partition] = row

    def restore(self, pipeline: MonitorPipeline, wall: float) -> int:
        """Load every row this worker holds into a fresh `pipeline`; returns how many records
        it joined again."""
        self._segment_of, self._live, self._clock_rows = {}, {}, {}
        rows = list(self.rows.items())
        watermarks: dict[int, float] = {}
        for partition, key, value in rows:
            if key[:1] == b"c":
                watermarks[partition] = self._load_clock(pipeline, wall, partition, value)
        if watermarks:
            # One watermark for all: the slowest partition's, so none of its records is late.
            pipeline.clock.restore(min(watermarks.values()))
        joined = 0
        for partition, key, value in rows:
            if key[:1] == b"s":
                joined += self._load_segment(
                    pipeline, partition, key, value, watermarks.get(partition, -math.inf)
                )
        for partition, key, _ in rows:
            if key[:1] == b"s" and key not in self._live:
                self.rows.delete(partition, key)  # everything in it had closed
        return joined

    @staticmethod
    def _load_clock(pipeline: MonitorPipeline, wall: float, partition: int, raw: bytes) -> float:
        row = json.loads(raw)
        watermark = -math.inf if row["watermark"] is None else row["watermark"]
        if row["reported_through"] is not None:
            pipeline.resume_after(row["reported_through"])
        for name, newest in row["newest"].items():
            pipeline.clock.observe(newest, wall, name)
        for start, version, experiment, arm, counts in row["windows"]:
            pipeline.windows.restore((partition, start, version, experiment, arm),
                                     Counts.from_dict(counts))
        return float(watermark)

    def _load_segment(
        self, pipeline: MonitorPipeline, partition: int, key: bytes, raw: bytes,
        watermark: float,
    ) -> int:
        window = pipeline.join.window_s
        joined = 0
        for kind, value in msgpack.unpackb(raw):
            try:
                row = self._load_record(pipeline, partition, kind, value, watermark, window)
            except ValueError as error:  # a record a newer contract refuses: not worth a crash
                logger.warning("state record skipped partition=%d kind=%s error=%s",
                               partition, kind, error)
                continue
            if row is not None:
                self._segment_of[row] = key
                self._live[key] = self._live.get(key, 0) + 1
                joined += 1
        return joined

    @staticmethod
    def _load_record(
        pipeline: MonitorPipeline, partition: int, kind: str, value: bytes, watermark: float,
        window: float,
    ) -> RowId | None:
        """The record joined again, or None when it had closed before the watermark."""
        join = pipeline.join
        if kind == _ACT:
            event = decode(InteractionEvent, value)
            if event.timestamp + window < watermark:
                return None
            join.add_interaction(event, -math.inf, partition)
            return (_ACT, event.event_id)
        record: RecommendationResponse | ServedFeatures = (
            decode(RecommendationResponse, value) if kind == _RESPONSE
            else decode(ServedFeatures, value)
        )
        if record.served_at + window < watermark:
            return None
        if isinstance(record, RecommendationResponse):
            join.add_response(record, partition)
        else:
            join.add_features(record, partition)
        return (kind, record.request_id)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
