"""The consume -> validate -> handle -> dead-letter -> commit cycle every Kafka service runs.

Ordering per batch is what makes it safe:
1. decode every record against its contract; rejects go to the dead-letter writer;
2. hand the valid records (with their positions) to the service's handler, which performs its
   side effects and may produce output records;
3. flush the producer (dead letters and outputs are acknowledged by the broker);
4. commit the offsets after the batch.
A crash anywhere before 4 re-delivers the batch: outputs may repeat (consumers dedupe by id),
nothing is lost. A handler error on one record dead-letters that record (stage "apply") and the
loop keeps going: a worker never crashes on a bad event.

A secondary reader of a topic (the trainer reads `interactions` after the feature workers have
dead-lettered its bad records) passes `dead_letters=None`: invalid records are then counted as
filtered instead of being dead-lettered a second time.

A reader of a compacted topic whose records are a table (a row per key) passes `on_tombstone`:
a record with a key and no value then deletes that key's row, in its place among the batch's
records, instead of being dead-lettered as a record without a value.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from confluent_kafka import Message
from pydantic import BaseModel

from schemas.limits import DEFAULT_MAX_FUTURE_SKEW_S
from schemas.wire import ContractError, decode
from streams.kafka.consumer import BatchConsumer, source_position
from streams.kafka.deadletter import DeadLetterWriter, SourcePosition, Stage
from streams.kafka.producer import EventProducer

logger = logging.getLogger(__name__)

R = TypeVar("R", bound=BaseModel)


@dataclass(frozen=True)
class Envelope(Generic[R]):
    """A valid record with where it came from (for idempotency and dead letters)."""

    record: R
    key: bytes | None
    position: SourcePosition
    raw: bytes


class RecordRejected(Exception):
    """Raised by a handler for one record it cannot process; the record is dead-lettered."""

    def __init__(self, envelope: Envelope[BaseModel], error: BaseException) -> None:
        super().__init__(str(error))
        self.envelope = envelope
        self.error = error


Handler = Callable[[list[Envelope[R]]], Sequence[RecordRejected]]
"""Applies a batch; returns the records it rejected (dead-lettered; the rest count as done)."""


@dataclass(frozen=True)
class Tombstone:
    """A compacted topic's delete marker: a key without a value."""

    key: bytes
    position: SourcePosition


TombstoneHandler = Callable[[Tombstone], None]
"""Deletes the row a tombstone's key names; raises ContractError for a key that names no row
(dead-lettered at stage "validate"), anything else when the delete fails ("apply")."""


@dataclass
class LoopCounters:
    """Conservation: consumed == handled + dead_lettered + filtered, at every batch boundary."""

    consumed: int = 0
    handled: int = 0
    dead_lettered: int = 0
    filtered: int = 0


class ContractLoop(Generic[R]):
    def __init__(
        self,
        consumer: BatchConsumer,
        model: type[R],
        handler: Handler[R],
        producer: EventProducer,
        dead_letters: DeadLetterWriter | None,
        batch_size: int = 500,
        batch_timeout_s: float = 0.05,
        max_future_skew_s: float = DEFAULT_MAX_FUTURE_SKEW_S,
        isolate_records: bool = False,
        on_tombstone: TombstoneHandler | None = None,
        fill_batches: bool = True,
    ) -> None:
        self.consumer = consumer
        self.model = model
        self.handler = handler
        self.producer = producer
        self.dead_letters = dead_letters
        self.batch_size = batch_size
        self.batch_timeout_s = batch_timeout_s
        self.max_future_skew_s = max_future_skew_s
        self.isolate_records = isolate_records
        """Hand records to the handler one at a time and dead-letter one that raises (stage
        "apply"): for control topics, whose handlers are not idempotent enough to re-run a
        batch and whose volume makes one call per record free."""
        self.on_tombstone = on_tombstone
        self.fill_batches = fill_batches
        """False: a batch is what is queued once a first record came (waiting at most
        `batch_timeout_s` for that one), never a wait for more: for low-volume control topics,
        whose records should act as soon as they arrive."""
        self.counters = LoopCounters()
        self.finished: dict[tuple[str, int], int] = {}
        """Per (topic, partition), the offset after the last record this loop finished (handled
        or dead-lettered, and committed): how far it has read, for readers on other threads."""
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        while not self._stop.is_set():
            self.run_once()
        self.producer.flush()

    def run_once(self) -> int:
        """Process one batch; returns how many records it consumed."""
        if self.fill_batches:
            batch = self.consumer.poll_batch(self.batch_size, self.batch_timeout_s)
        else:
            batch = self.consumer.poll_ready(self.batch_size, self.batch_timeout_s)
        if not batch:
            return 0
        decoded = self._read(batch)
        rejected = self._handle_in_order(decoded)
        self.producer.flush()
        self.consumer.commit(batch)
        self._count(len(batch), len(batch) - len(decoded), rejected)
        for message in batch:
            position = source_position(message)
            self.finished[(position.topic, position.partition)] = position.offset + 1
        return len(batch)

    def _handle_in_order(self, decoded: list[Envelope[R] | Tombstone]) -> int:
        """Hands runs of records to the handler and tombstones to `on_tombstone`, in stream
        order; returns how many were dead-lettered."""
        rejected = 0
        run: list[Envelope[R]] = []
        for item in [*decoded, None]:
            if isinstance(item, Envelope):
                run.append(item)
                continue
            for rejection in self._handle(run) if run else []:
                env = rejection.envelope
                self._reject(env.key, env.raw, rejection.error, env.position, "apply")
                rejected += 1
            run = []
            deleting = self.on_tombstone
            if isinstance(item, Tombstone) and deleting and not self._delete(item, deleting):
                rejected += 1
        return rejected

    def _delete(self, tombstone: Tombstone, handler: TombstoneHandler) -> bool:
        try:
            handler(tombstone)
        except Exception as error:
            logger.warning(
                "tombstone not applied topic=%s partition=%d offset=%d error=%s",
                tombstone.position.topic, tombstone.position.partition,
                tombstone.position.offset, type(error).__name__,
            )
            # A tombstone's key is its whole record: a key that fails its contract is invalid.
            stage: Stage = "validate" if isinstance(error, ContractError) else "apply"
            self._reject(tombstone.key, None, error, tombstone.position, stage)
            return False
        return True

    def _handle(self, valid: list[Envelope[R]]) -> Sequence[RecordRejected]:
        if not self.isolate_records:
            return self.handler(valid)
        rejected: list[RecordRejected] = []
        for envelope in valid:
            try:
                rejected.extend(self.handler([envelope]))
            except Exception as error:
                logger.exception(
                    "handler failed topic=%s partition=%d offset=%d",
                    envelope.position.topic, envelope.position.partition,
                    envelope.position.offset,
                )
                rejected.append(RecordRejected(envelope, error))  # type: ignore[arg-type]
        return rejected

    def _count(self, consumed: int, invalid: int, rejected: int) -> None:
        self.counters.consumed += consumed
        self.counters.handled += consumed - invalid - rejected
        if self.dead_letters is None:
            self.counters.filtered += invalid + rejected
        else:
            self.counters.dead_lettered += invalid + rejected

    def _reject(
        self,
        key: bytes | None,
        raw: bytes | None,
        error: BaseException,
        position: SourcePosition,
        stage: Stage,
    ) -> None:
        if self.dead_letters is None:
            logger.warning(
                "filtered topic=%s partition=%d offset=%d stage=%s error=%s",
                position.topic, position.partition, position.offset, stage,
                error.kind if isinstance(error, ContractError) else type(error).__name__,
            )
            return
        self.dead_letters.write(key, raw, error, position, stage)

    def _read(self, batch: list[Message]) -> list[Envelope[R] | Tombstone]:
        """The batch's valid records and, with `on_tombstone`, its tombstones, in order."""
        read: list[Envelope[R] | Tombstone] = []
        for message in batch:
            key = message.key()
            if message.value() is None and key and self.on_tombstone is not None:
                read.append(Tombstone(key, source_position(message)))
            elif (envelope := self._decode_one(message)) is not None:
                read.append(envelope)
        return read

    def _decode(self, batch: list[Message]) -> list[Envelope[R]]:
        return [e for message in batch if (e := self._decode_one(message)) is not None]

    def _decode_one(self, message: Message) -> Envelope[R] | None:
        """The record, or None when it fails its contract (then it is dead-lettered)."""
        raw = message.value()
        position = source_position(message)
        try:
            record = decode(self.model, raw, self.max_future_skew_s)
        except ContractError as error:
            self._reject(message.key(), raw, error, position, "validate")
            return None
        # decode() succeeded, so raw is not None.
        return Envelope(record, message.key(), position, raw or b"")
