"""The feature worker: a batch loop that turns `interactions` into Redis features.

Run with `streamrec stream`; every setting comes from STREAMREC_* variables
(streams/feature_worker/settings.py). Workers sharing `group_id` split the partitions.

Each turn consumes up to `batch_max_events` records with confluent-kafka (within a window of
`batch_within_s` from the previous consume's return, `busy_batch_within_s` on a busy stream:
batch_window.py),
validates and applies them (pipeline.py: one pipelined Redis round trip of per-entity script
calls, dead letters flushed), and only then stores the batch's next offsets; librdkafka commits
stored offsets every second, before partitions are revoked and on close. The cost per record
is its decode and a few reads; the fold, the metrics and the Redis calls work per batch.

Durable before committed: Redis acknowledges a write after writing it to its AOF (so a crash of
Redis alone loses nothing acknowledged), and fsyncs the AOF once a second (`appendfsync
everysec`, deploy/local/redis.py). A batch's offsets are stored only `durable_after_s` after the
acknowledgement, past that fsync horizon, so a commit never covers an effect a crash of the
machine could lose, at no cost to Redis (docs/architecture.md). A worker that stops or loses
partitions before then leaves those offsets uncommitted: re-read, and skipped as applied.

A Redis restart is a rewind: a restarted Redis may lack writes it acknowledged (redis_epoch.py),
so when the worker's connection reaches a new Redis process, before it writes anything there,
it drops the batches not yet durable and seeks every partition it holds back to the last
offsets it stored for commit (the group's committed ones where it stored none), and applies
from there; the entities' applied offsets skip what survived.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from types import FrameType
from typing import cast

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, TopicPartition

from schemas.topics import INTERACTIONS
from streams.feature_worker.batch_window import consume_timeout, next_batch_wait
from streams.feature_worker.metrics import StreamMetrics
from streams.feature_worker.pipeline import Backoff, FeaturePipeline, SourceRecord
from streams.feature_worker.redis_epoch import RedisEpoch, RedisRestarted
from streams.feature_worker.settings import StreamSettings
from streams.feature_worker.writer import FeatureWriter
from streams.kafka.consumer import BatchConsumer
from streams.kafka.deadletter import DeadLetterWriter
from streams.kafka.producer import EventProducer

logger = logging.getLogger(__name__)

EXIT_ABANDONED_BATCH = 75
"""Exit status when the worker stops holding a batch it could not apply (it will be re-read)."""

_STOP_GRACE_S = 5.0


def consumer_overrides(settings: StreamSettings) -> dict[str, object]:
    """librdkafka settings of the worker on top of BatchConsumer's (manual offset store)."""
    overrides: dict[str, object] = {
        # Stored offsets only: commits move no further than what Redis has durably applied.
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 1000,
        "fetch.min.bytes": settings.fetch_min_bytes,
        "fetch.wait.max.ms": settings.fetch_max_wait_ms,
        "session.timeout.ms": int(settings.session_timeout_s * 1000),
        "heartbeat.interval.ms": int(min(3.0, settings.session_timeout_s / 3) * 1000),
    }
    if settings.instance_id is not None:
        overrides["group.instance.id"] = settings.instance_id
    return overrides


def source_records(messages: Sequence[Message]) -> list[SourceRecord]:
    """The records' positions, payloads and Kafka times (a consumed record always has a topic,
    partition and offset), read with C calls per field."""
    stamps = [ts if ts_type and ts >= 0 else None for ts_type, ts in map(_TIMESTAMP, messages)]
    return list(map(
        SourceRecord, map(_TOPIC, messages), map(_PARTITION, messages), map(_OFFSET, messages),
        map(_KEY, messages), map(_VALUE, messages), stamps,
    ))


_TIMESTAMP = Message.timestamp
_TOPIC = cast(Callable[[Message], str], Message.topic)
_PARTITION = cast(Callable[[Message], int], Message.partition)
_OFFSET = cast(Callable[[Message], int], Message.offset)
_KEY = Message.key
_VALUE = Message.value


def next_positions(records: Sequence[SourceRecord]) -> list[TopicPartition]:
    """The committable position (last offset + 1) per topic-partition of a batch, read off the
    records already taken out of the messages."""
    latest: dict[tuple[str, int], int] = {}
    for record in records:
        key = (record.topic, record.partition)
        if record.offset > latest.get(key, -1):
            latest[key] = record.offset
    return [TopicPartition(t, p, o + 1) for (t, p), o in sorted(latest.items())]


class FeatureWorker:
    """The consume -> apply -> store loop, with the rebalance bookkeeping it needs."""

    def __init__(self, settings: StreamSettings, metrics: StreamMetrics) -> None:
        self._settings = settings
        self._metrics = metrics
        self._assigned: set[int] = set()
        self._pending: deque[tuple[float, list[TopicPartition]]] = deque()
        """(acknowledged at, next offsets) of applied batches not yet past the fsync horizon."""
        self._durable: dict[int, TopicPartition] = {}
        """Per partition, the last offset stored for commit: where a rewind returns to."""
        self._stopping = False
        self._loop = asyncio.new_event_loop()
        self.epoch = RedisEpoch()
        producer = EventProducer(settings.kafka)
        writer = FeatureWriter(
            FeatureWriter.connect(settings.redis, settings.in_flight_calls, self.epoch.check),
            settings.redis.key_prefix,
            settings.key_ttls(), settings.call_events, call_entities=settings.call_entities,
            popularity_bucket_s=settings.popularity_bucket_s,
        )
        self._pipeline = FeaturePipeline(
            writer, DeadLetterWriter(producer, settings.service_name), producer, metrics,
            Backoff(settings.retry_initial_s, settings.retry_max_s), settings.batch_max_events,
            max_future_skew_s=settings.max_future_skew_s,
        )
        self._consumer = BatchConsumer(
            settings.kafka, settings.group_id, [settings.kafka.topic(INTERACTIONS)],
            on_assign=self._on_assign, on_revoke=self._on_revoke,
            overrides=consumer_overrides(settings),
        )

    def _on_assign(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self._assigned.update(tp.partition for tp in partitions)
        self._metrics.assigned_partitions.set(len(self._assigned))

    def _on_revoke(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        # Callbacks run inside consume(), between batches: every batch handed out before has
        # been applied and stored, so the commit librdkafka makes now covers all of it.
        self._assigned.difference_update(tp.partition for tp in partitions)
        self._metrics.assigned_partitions.set(len(self._assigned))
        gone = {tp.partition for tp in partitions}
        for partition in gone:
            self._durable.pop(partition, None)
        self._pending = deque(
            (at, [tp for tp in offsets if tp.partition not in gone])
            for at, offsets in self._pending
        )

    def stop(self, signum: int, _: FrameType | None) -> None:
        if not self._stopping:
            logger.info("stopping feature worker signal=%d", signum)
        self._stopping = True
        if not self._loop.is_closed():
            # A batch still waiting for Redis gets a grace period, then is abandoned uncommitted.
            self._loop.call_soon_threadsafe(
                self._loop.call_later, _STOP_GRACE_S, _abandon, "stopped"
            )

    def run(self) -> None:
        settings = self._settings
        gc.collect()
        gc.freeze()  # start-up objects never need scanning again: cheaper collections
        # A batch's records, columns and updates (a few hundred thousand objects for 10,000
        # events) live until it is written, so with the default thresholds (700, 10, 10) most
        # collections scan them in vain: collect young objects every 200,000 allocations (about
        # once per full batch), older ones every 20 of those.
        gc.set_threshold(200_000, 20, 20)
        window_s = settings.batch_within_s
        returned = time.monotonic()
        try:
            while not self._stopping:
                messages = self._consumer.poll_batch(
                    settings.batch_max_events,
                    consume_timeout(window_s, time.monotonic() - returned),
                )
                now = time.monotonic()
                window_s = next_batch_wait(settings, len(messages), now - returned)
                returned = now
                if messages:
                    self._process(messages)
                self._store_durable(time.monotonic() - settings.durable_after_s)
            if self._pending:  # stopping: wait out the horizon, then commit everything applied
                time.sleep(max(0.0, self._pending[-1][0] + settings.durable_after_s
                               - time.monotonic()))
                self._store_durable(time.monotonic())
        finally:
            self._consumer.close()  # commits what was stored
            self._loop.run_until_complete(self._pipeline.close())
            self._loop.close()

    def _process(self, messages: list[Message]) -> None:
        records = source_records(messages)
        try:
            self._loop.run_until_complete(self._pipeline.process(records))
        except RedisRestarted:
            self._rewind()
            return
        except Exception:
            logger.exception("batch processing failed events=%d", len(messages))
            _abandon("failed")
        offsets = next_positions(records)
        self._pending.append((time.monotonic(), offsets))
        self._observe_lag(offsets)

    def _store_durable(self, acknowledged_by: float) -> None:
        """Stores the offsets of batches acknowledged by `acknowledged_by` (monotonic s)."""
        latest: dict[int, TopicPartition] = {}
        while self._pending and self._pending[0][0] <= acknowledged_by:
            for tp in self._pending.popleft()[1]:
                latest[tp.partition] = tp
        if not latest:
            return
        try:
            self._consumer.raw.store_offsets(offsets=list(latest.values()))
        except KafkaException as exc:
            # Partitions taken away meanwhile: their new owner reads them again (idempotent).
            logger.warning("offsets not stored reason=%s", exc.args[0])
            return
        self._durable.update(latest)

    def _rewind(self) -> None:
        """Redis is a new process: what it acknowledged since the last durable position may be
        lost, so every partition this worker holds goes back there (before any write)."""
        self._pending.clear()
        raw = self._consumer.raw
        held = raw.assignment()
        unknown = [tp for tp in held if tp.partition not in self._durable]
        try:
            committed = raw.committed(unknown, timeout=30) if unknown else []
        except KafkaException:
            _abandon("unable to rewind")  # a restart reads from the committed offsets
        starts = [self._durable[tp.partition] for tp in held if tp.partition in self._durable]
        starts += [TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0
                                  else OFFSET_BEGINNING) for tp in committed]
        for tp in starts:
            raw.seek(tp)
        self._metrics.rewinds.inc()
        logger.warning("rewound after a redis restart partitions=%s",
                       sorted((tp.partition, tp.offset) for tp in starts))

    def _observe_lag(self, offsets: list[TopicPartition]) -> None:
        for tp in offsets:
            try:
                _, high = self._consumer.raw.get_watermark_offsets(tp, cached=True)
            except KafkaException:
                continue
            if high >= 0:
                self._metrics.consumer_lag.labels(str(tp.partition)).set(max(0, high - tp.offset))


def _abandon(kind: str) -> None:
    logger.critical("worker %s holding an unapplied batch; exiting without commit", kind)
    logging.shutdown()
    os._exit(EXIT_ABANDONED_BATCH)


def main() -> None:
    settings = StreamSettings()
    settings.apply_cpu_nice()
    level = os.environ.get("STREAMREC_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    metrics = StreamMetrics()
    metrics.serve(settings.metrics_port, settings.metrics_host)
    worker = FeatureWorker(settings, metrics)
    signal.signal(signal.SIGTERM, worker.stop)
    signal.signal(signal.SIGINT, worker.stop)
    logger.info(
        "starting feature worker group=%s topic=%s key_prefix=%s",
        settings.group_id,
        settings.kafka.topic(INTERACTIONS),
        settings.redis.key_prefix,
    )
    worker.run()


if __name__ == "__main__":
    main()
