"""Reads a time window of `interactions` back from Kafka for a full retrain.

The window is chosen by Kafka record time (offsets_for_times) and closed at the high watermarks
seen when the replay starts, so the replay is a fixed set of records: the retrained model covers
exactly [start offsets, end offsets) per partition and the online loop resumes at the end offsets.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import OFFSET_END, Consumer, TopicPartition

from schemas import ContractError, InteractionEvent, decode
from schemas.topics import INTERACTIONS
from streams.kafka.connection import KafkaConnection

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetrainWindow:
    """Where a drift retrain's replay starts (record time) and when it may start (wall time)."""

    since: float
    start_at: float


def retrain_window(
    now: float, window_s: float, change_started_at: float | None, min_after_change_s: float | None
) -> RetrainWindow:
    """The replay covers `window_s` back from the start, or only the new regime when the alert
    dates the change inside that window: history before a change teaches the model the world
    that is gone. The retrain then waits until `min_after_change_s` of the new regime exist,
    since a model fitted on the first seconds after a change knows too few users and items.
    Event time stands in for Kafka record time here; both come from the producers' clocks.
    `min_after_change_s` None: the change time is not used (the fixed window, at once)."""
    dated = min_after_change_s is not None and change_started_at is not None
    if not dated or change_started_at is None or change_started_at <= now - window_s:
        return RetrainWindow(now - window_s, now)
    assert min_after_change_s is not None
    start_at = max(now, change_started_at + min_after_change_s)
    return RetrainWindow(max(change_started_at, start_at - window_s), start_at)


@dataclass(frozen=True)
class Replay:
    events: list[InteractionEvent]
    start_offsets: dict[int, int]
    end_offsets: dict[int, int]
    invalid: int


@dataclass(frozen=True)
class Replayed:
    """A decoded record and where Kafka kept it."""

    event: InteractionEvent
    kafka_timestamp_ms: int
    partition: int
    offset: int

    def order(self) -> tuple[float, int, int, int]:
        """Event time orders the history; Kafka time only chose the window. Kafka time, then
        partition and offset break ties, so any two readers of the same records (this replay,
        the archive) agree on the order."""
        return (self.event.timestamp, self.kafka_timestamp_ms, self.partition, self.offset)


def replay_consumer(connection: KafkaConnection) -> Consumer:
    return Consumer(
        {
            **connection.client_config(),
            "group.id": f"streamrec-replay-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )


def window_offsets(
    consumer: Consumer, topic: str, since_s: float
) -> tuple[dict[int, int], dict[int, int]]:
    """Per partition, the first offset at or after record time `since_s` and the high watermark
    now: the window is [start, end)."""
    partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        for p in partitions
    }
    wanted = [TopicPartition(topic, p, int(since_s * 1000)) for p in partitions]
    found = consumer.offsets_for_times(wanted, timeout=10)
    starts = {tp.partition: (tp.offset if tp.offset >= 0 else ends[tp.partition]) for tp in found}
    return starts, ends


def replay_window(connection: KafkaConnection, since_s: float, timeout_s: float = 600.0) -> Replay:
    topic = connection.topic(INTERACTIONS)
    consumer = replay_consumer(connection)
    try:
        starts, ends = window_offsets(consumer, topic, since_s)
        records, invalid = read_offsets(consumer, topic, starts, ends, timeout_s)
    finally:
        consumer.close()
    ordered = sorted(records, key=Replayed.order)
    logger.info("replayed topic=%s events=%d invalid=%d", topic, len(ordered), invalid)
    return Replay([r.event for r in ordered], dict(starts), dict(ends), invalid)


def read_offsets(
    consumer: Consumer, topic: str, starts: dict[int, int], ends: dict[int, int], timeout_s: float
) -> tuple[list[Replayed], int]:
    """The records at offsets [starts[p], ends[p]) of every partition, in arrival order, and
    how many of them did not decode."""
    remaining = {p for p in starts if starts[p] < ends[p]}
    consumer.assign(
        [TopicPartition(topic, p, starts[p] if p in remaining else OFFSET_END) for p in starts]
    )
    records: list[Replayed] = []
    invalid = 0
    deadline = time.monotonic() + timeout_s
    while remaining and time.monotonic() < deadline:
        for message in consumer.consume(num_messages=5000, timeout=0.5):
            partition, offset = message.partition(), message.offset()
            if message.error() is not None or partition is None or offset is None:
                continue
            if offset >= ends[partition]:
                remaining.discard(partition)
                continue
            try:
                event = decode(InteractionEvent, message.value())
                records.append(Replayed(event, int(message.timestamp()[1]), partition, offset))
            except ContractError:
                invalid += 1  # the feature workers dead-lettered it already
            if offset + 1 >= ends[partition]:
                remaining.discard(partition)
    if remaining:
        raise TimeoutError(f"replay of {topic} incomplete after {timeout_s}s: {sorted(remaining)}")
    return records, invalid
