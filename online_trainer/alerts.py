"""The trainer's door on `alerts.drift`.

An alert that asks for work stays pending, its offset uncommitted, until that work is durable:
a retrain alert until the retrain it started has published, so a trainer killed mid-retrain
reads it again after a restart and retrains then. While anything is pending no later offset is
committed either (a commit covers everything before it on its partition). A group with no
committed position yet starts `max_age_s` back in time, not at the beginning of the topic: a
first deployment does not replay last month's alerts; a pending alert is re-read however old.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, Message, TopicPartition

from schemas import ContractError, DriftAlert, decode
from schemas.topics import ALERTS_DRIFT
from streams.kafka.connection import KafkaConnection
from streams.kafka.consumer import (
    ASSIGNED_NOT_KNOWN_YET,
    BatchConsumer,
    committed_offsets,
    source_position,
    until_answered,
)
from streams.kafka.deadletter import DeadLetterWriter
from streams.kafka.producer import EventProducer

logger = logging.getLogger(__name__)

_COMMITTED_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Received:
    alert: DriftAlert
    message: Message


class DriftAlerts:
    def __init__(
        self,
        kafka: KafkaConnection,
        group_id: str,
        max_age_s: float,
        producer: EventProducer,
        max_future_skew_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.max_age_s = max_age_s
        self.max_future_skew_s = max_future_skew_s
        self.producer = producer
        self.dead_letters = DeadLetterWriter(producer, "trainer")
        self._clock = clock
        self.consumer = BatchConsumer(
            kafka, group_id, [kafka.topic(ALERTS_DRIFT)],
            auto_offset_reset="earliest", on_assign=self._on_assign,
            # Eager assignment: the callback places every partition it is given with assign().
            overrides={"partition.assignment.strategy": "range"},
        )
        self._held: list[Message] = []
        self._pending = 0

    @property
    def pending(self) -> bool:
        return self._pending > 0

    def poll(self) -> list[Received]:
        """Valid alerts in order; an invalid record is dead-lettered (durably, before its
        offset may be committed) and passed over."""
        received = []
        for message in self.consumer.poll_batch(100, 0.0):
            try:
                alert = decode(DriftAlert, message.value(), self.max_future_skew_s)
            except ContractError as error:
                self.dead_letters.write(
                    message.key(), message.value(), error, source_position(message)
                )
                self.producer.flush()
                self.done(message)
                continue
            received.append(Received(alert, message))
        return received

    def hold(self, message: Message) -> None:
        """Keep this alert pending until :meth:`release`."""
        self._pending += 1
        self._held.append(message)

    def done(self, message: Message) -> None:
        """This alert needs nothing more: commit it, unless an earlier one is still pending."""
        if self._held:
            self._held.append(message)
        else:
            self.consumer.commit([message])

    def release(self) -> None:
        """The pending work is durable: commit everything held."""
        if self._held:
            self.consumer.commit(self._held)
        self._held, self._pending = [], 0

    def close(self) -> None:
        self.consumer.close()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        committed = committed_offsets(consumer, partitions)
        since_ms = int(1000 * (self._clock() - self.max_age_s))
        fresh = [TopicPartition(tp.topic, tp.partition, since_ms) for tp in committed
                 if tp.offset < 0]
        # offsets_for_times answers OFFSET_END where no record is that recent: the right start.
        starts = until_answered(
            "offsets_for_times",
            lambda: consumer.offsets_for_times(fresh, timeout=_COMMITTED_TIMEOUT_S),
            not_now=ASSIGNED_NOT_KNOWN_YET,
        ) if fresh else []
        by_partition = {tp.partition: tp.offset for tp in starts}
        for tp in partitions:
            tp.offset = by_partition.get(tp.partition, tp.offset)
        consumer.assign(partitions)
