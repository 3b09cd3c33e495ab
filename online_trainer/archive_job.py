"""The compaction job (`streamrec archive`): `interactions` from Kafka into the window archive.

One run reads every partition from where the archive ends (its batch records, not the consumer
group, say so) up to the high watermark seen when the run starts, and exits: run it on a
schedule. Per partition it writes a batch once `batch_max_events` records have been read or the
partition is done. Records that do not decode are dead-lettered; the dead letters are flushed
before the batch is recorded, and the group commits after it, so a crash anywhere re-reads the
batch and writes the same files again (a duplicate dead letter at worst, never a lost record or
a duplicated row).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from online_trainer.archive import ArchivedRow, WindowArchive, event_day
from online_trainer.archive_settings import ArchiveSettings
from schemas import ContractError, InteractionEvent, decode
from schemas.topics import INTERACTIONS
from streams.kafka.consumer import commit_offsets, source_position, until_answered
from streams.kafka.deadletter import DeadLetterWriter
from streams.kafka.principals import ARCHIVER
from streams.kafka.producer import EventProducer

logger = logging.getLogger(__name__)

SERVICE = ARCHIVER


@dataclass
class _Pending:
    start: int
    rows: list[ArchivedRow] = field(default_factory=list)
    invalid: int = 0
    next_offset: int = 0

    @property
    def records(self) -> int:
        return len(self.rows) + self.invalid


@dataclass(frozen=True)
class ArchiveRun:
    rows: int
    invalid: int
    batches: int
    pruned_days: int
    complete: bool
    """False when `run_timeout_s` stopped the run before every partition's end."""


def archive_root(settings: ArchiveSettings) -> WindowArchive:
    return WindowArchive.of_topic(settings.archive_dir, settings.kafka.topic(INTERACTIONS))


def run_archive(settings: ArchiveSettings, producer: EventProducer | None = None) -> ArchiveRun:
    archive = archive_root(settings)
    producer = producer or EventProducer(settings.kafka)
    consumer = Consumer({
        **settings.kafka.client_config(),
        "group.id": settings.group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
    })
    try:
        job = _Job(settings, archive, consumer, producer)
        run = job.run()
    finally:
        consumer.close()
    pruned = 0
    if settings.retention_days is not None:
        cutoff = event_day(time.time()) - timedelta(days=settings.retention_days)
        pruned = archive.prune_before(cutoff)
    logger.info(
        "archived rows=%d invalid=%d batches=%d pruned_days=%d complete=%s",
        run.rows, run.invalid, run.batches, pruned, run.complete,
    )
    return ArchiveRun(run.rows, run.invalid, run.batches, pruned, run.complete)


class _Job:
    def __init__(
        self,
        settings: ArchiveSettings,
        archive: WindowArchive,
        consumer: Consumer,
        producer: EventProducer,
    ) -> None:
        self.settings = settings
        self.archive = archive
        self.consumer = consumer
        self.producer = producer
        self.dead_letters = DeadLetterWriter(producer, SERVICE)
        self.topic = settings.kafka.topic(INTERACTIONS)
        self.rows = self.invalid = self.batches = 0

    def run(self) -> ArchiveRun:
        pending, ends = self._assign()
        deadline = time.monotonic() + self.settings.run_timeout_s
        while pending and time.monotonic() < deadline:
            for message in self.consumer.consume(num_messages=5000, timeout=0.5):
                self._take(message, pending, ends)
        complete = not pending
        for partition in sorted(pending):
            self._flush(partition, pending[partition])
        return ArchiveRun(self.rows, self.invalid, self.batches, 0, complete)

    def _assign(self) -> tuple[dict[int, _Pending], dict[int, int]]:
        metadata = until_answered(
            "metadata", lambda: self.consumer.list_topics(self.topic, timeout=10)
        )
        partitions = sorted(metadata.topics[self.topic].partitions)
        resume = self.archive.next_offsets()
        pending, ends = {}, {}
        for p in partitions:
            low, high = self.consumer.get_watermark_offsets(
                TopicPartition(self.topic, p), timeout=10
            )
            start = max(resume.get(p, 0), low)
            if p in resume and resume[p] < low:
                logger.warning(
                    "archive gap partition=%d archived_to=%d kafka_from=%d", p, resume[p], low
                )
            ends[p] = high
            if start < high:
                pending[p] = _Pending(start, next_offset=start)
        self.consumer.assign([TopicPartition(self.topic, p, s.start) for p, s in pending.items()])
        return pending, ends

    def _take(self, message: Message, pending: dict[int, _Pending], ends: dict[int, int]) -> None:
        error = message.error()
        if error is not None and error.code() == KafkaError._PARTITION_EOF:
            self._reached_end(message, pending, ends)
            return
        if error is not None:
            logger.warning("consumer error code=%s reason=%s", error.code(), error.str())
            return
        position = source_position(message)
        batch = pending.get(position.partition)
        if batch is None or position.offset >= ends[position.partition]:
            return
        try:
            event = decode(InteractionEvent, message.value())
            batch.rows.append(_row(event, position.partition, position.offset,
                                   position.timestamp_ms))
        except ContractError as rejected:
            self.dead_letters.write(message.key(), message.value(), rejected, position, "decode")
            batch.invalid += 1
        batch.next_offset = position.offset + 1
        done = batch.next_offset >= ends[position.partition]
        if done or batch.records >= self.settings.batch_max_events:
            self._flush(position.partition, batch)
            if done:
                del pending[position.partition]
            else:
                pending[position.partition] = _Pending(batch.next_offset,
                                                       next_offset=batch.next_offset)

    def _reached_end(
        self, message: Message, pending: dict[int, _Pending], ends: dict[int, int]
    ) -> None:
        """The end of a partition's log: the offsets up to the run's end that held no record
        (transaction markers) are covered too, so the run does not wait for them."""
        partition, offset = message.partition(), message.offset()
        if partition is None or offset is None or partition not in pending:
            return
        if offset >= ends[partition]:
            batch = pending.pop(partition)
            batch.next_offset = ends[partition]
            self._flush(partition, batch)

    def _flush(self, partition: int, batch: _Pending) -> None:
        if batch.next_offset <= batch.start:
            return
        self.producer.flush()  # the dead letters are kept before the records are passed
        self.archive.write_batch(partition, batch.start, batch.next_offset, batch.rows,
                                 batch.invalid)
        commit_offsets(self.consumer, [TopicPartition(self.topic, partition, batch.next_offset)])
        self.rows += len(batch.rows)
        self.invalid += batch.invalid
        self.batches += 1
        logger.info(
            "archived batch partition=%d start=%d end=%d rows=%d invalid=%d",
            partition, batch.start, batch.next_offset, len(batch.rows), batch.invalid,
        )


def _row(event: InteractionEvent, partition: int, offset: int, kafka_ms: int | None) -> ArchivedRow:
    return ArchivedRow(
        event_id=event.event_id,
        user_id=event.user_id,
        session_id=event.session_id,
        item_id=event.item_id,
        event_type=event.event_type.value,
        timestamp=float(event.timestamp),
        context=event.context.model_dump_json(exclude_none=True) if event.context else None,
        kafka_partition=partition,
        kafka_offset=offset,
        kafka_timestamp_ms=kafka_ms if kafka_ms is not None else -1,
    )
