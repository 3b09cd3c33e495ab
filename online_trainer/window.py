"""A retrain's window of `interactions`: from the archive where it holds the records, the tail
newer than the archive replayed from Kafka.

The window itself is chosen on Kafka exactly as a pure replay chooses it (record time `since`
to the high watermarks now, online_trainer/replay.py). Per partition the archive serves
[start, archive end) when it holds every offset from `start` on, and Kafka the rest; a
partition the archive does not reach back far enough for comes wholly from Kafka. Where Kafka's
retention has already deleted the window's oldest records, the archive serves them too: the
window's start in that partition is then found in the archive by record time. Both sources
are put in the replay's order (event time, Kafka time, partition, offset), so the retrain sees
exactly the examples a pure replay would give.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from confluent_kafka import TopicPartition

from online_trainer.archive import WindowArchive
from online_trainer.archive_loader import ArchiveLoader
from online_trainer.online_model import Interaction
from online_trainer.replay import Replayed, read_offsets, replay_consumer, window_offsets
from online_trainer.settings import TrainSettings
from schemas.topics import INTERACTIONS
from streams.kafka.connection import KafkaConnection

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Window:
    interactions: list[Interaction]
    start_offsets: dict[int, int]
    end_offsets: dict[int, int]
    archived: int
    """Events read from the archive."""
    replayed: int
    """Events replayed from Kafka."""
    invalid: int
    """Records of the Kafka part that did not decode (the archive holds only decoded ones)."""


@dataclass(frozen=True)
class Sources:
    archive: dict[int, tuple[int, int]]
    """Per partition, the offsets [start, end) the archive serves."""
    tail: dict[int, int]
    """Per partition, where the Kafka replay starts (it ends at the window's end)."""
    before_kafka: frozenset[int]
    """Partitions whose archive range begins before the oldest offset Kafka still holds: there
    the window's start is found in the archive, by record time."""


def split_sources(
    starts: dict[int, int], ends: dict[int, int], coverage: dict[int, tuple[int, int]],
    lows: dict[int, int] | None = None,
) -> Sources:
    """Where each partition of the window [starts, ends) is read from. `lows`: the oldest
    offset Kafka still holds per partition; where the window starts there (the older records
    are gone from Kafka) and the archive reaches further back, the archive holds them."""
    from_archive, tail, before = {}, {}, set()
    for p, start in starts.items():
        first, end = coverage.get(p, (start + 1, start))
        if lows is not None and start == lows.get(p) and first < start <= end:
            from_archive[p] = (first, min(end, ends[p]))
            tail[p] = min(end, ends[p])
            before.add(p)
        elif first <= start < end:
            from_archive[p] = (start, min(end, ends[p]))
            tail[p] = min(end, ends[p])
        else:
            tail[p] = start
    return Sources(from_archive, tail, frozenset(before))


def from_record_time(table: pa.Table, partitions: frozenset[int], since_ms: int) -> pa.Table:
    """Drops, in `partitions`, the rows before the first one at or after record time
    `since_ms`: the start Kafka's offsets_for_times would choose had it kept them."""
    if not partitions or not table.num_rows:
        return table
    part = table["kafka_partition"].to_numpy().astype(np.int64)
    offsets = table["kafka_offset"].to_numpy()
    recent = table["kafka_timestamp_ms"].to_numpy() >= since_ms
    keep = np.ones(len(part), dtype=bool)
    for p in partitions:
        mine = part == p
        hits = offsets[mine & recent]
        first = int(hits.min()) if len(hits) else int(offsets[mine].max(initial=-1)) + 1
        keep &= ~mine | (offsets >= first)
    return table.filter(pa.array(keep))


def load_window(
    connection: KafkaConnection,
    since_s: float,
    archive: WindowArchive | None,
    loader: ArchiveLoader | None = None,
    timeout_s: float = 600.0,
) -> Window:
    """The window from `since_s`; `archive` None replays it all from Kafka."""
    topic = connection.topic(INTERACTIONS)
    consumer = replay_consumer(connection)
    try:
        starts, ends = window_offsets(consumer, topic, since_s)
        coverage = archive.coverage() if archive is not None else {}
        lows = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[0]
            for p in starts
        }
        sources = split_sources(starts, ends, coverage, lows)
        began = time.perf_counter()
        table = None
        if archive is not None and sources.archive:
            table = from_record_time(
                (loader or ArchiveLoader()).load(archive, sources.archive),
                sources.before_kafka, int(since_s * 1000),
            )
        archive_s = time.perf_counter() - began
        records, invalid = read_offsets(consumer, topic, sources.tail, ends, timeout_s)
    finally:
        consumer.close()
    interactions = merge(table, records)
    archived = 0 if table is None else table.num_rows
    logger.info(
        "window topic=%s archived=%d replayed=%d invalid=%d archive_s=%.2f",
        topic, archived, len(records), invalid, archive_s,
    )
    return Window(interactions, starts, ends, archived, len(records), invalid)


def merge(table: pa.Table | None, records: list[Replayed]) -> list[Interaction]:
    """Archive rows and replayed records in the replay's order, as the retrain's interactions."""
    users = [r.event.user_id for r in records]
    items = [r.event.item_id for r in records]
    times = np.asarray([r.event.timestamp for r in records], dtype=np.float64)
    kafka = np.asarray([r.kafka_timestamp_ms for r in records], dtype=np.int64)
    partitions = np.asarray([r.partition for r in records], dtype=np.int64)
    offsets = np.asarray([r.offset for r in records], dtype=np.int64)
    if table is not None and table.num_rows:
        users = table["user_id"].to_pylist() + users
        items = table["item_id"].to_pylist() + items
        times = np.concatenate([table["timestamp"].to_numpy(), times])
        kafka = np.concatenate([table["kafka_timestamp_ms"].to_numpy(), kafka])
        partitions = np.concatenate([table["kafka_partition"].to_numpy().astype(np.int64),
                                     partitions])
        offsets = np.concatenate([table["kafka_offset"].to_numpy(), offsets])
    order = np.lexsort((offsets, partitions, kafka, times))
    return [Interaction(users[i], items[i], int(times[i])) for i in order.tolist()]


def retrain_window_events(settings: TrainSettings, since_s: float) -> Window:
    """A retrain's window under its settings: through the archive when one is configured."""
    archive = (
        WindowArchive.of_topic(settings.archive_dir, settings.kafka.topic(INTERACTIONS))
        if settings.archive_dir is not None
        else None
    )
    return load_window(settings.kafka, since_s, archive, ArchiveLoader(settings.archive_workers))
