"""A batch consumer that commits only after the side effects a batch caused.

`enable.auto.commit` and `enable.auto.offset.store` are off: offsets move only through
`commit(batch)`, which callers invoke after applying the batch and flushing any records (dead
letters, outputs) it produced. A crash before that commit re-delivers the batch, so every side
effect must be idempotent (see streams/features for how the feature writer ensures that).

A commit waits out a broker outage (`commit_offsets`): errors that say "not now" are retried with
backoff until the broker answers, so a service pauses instead of exiting. A commit the group
refuses (the partitions moved to another member while the broker was away) is logged and given
up: those records are delivered again to their new owner, which idempotent effects allow.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from streams.kafka.connection import KafkaConnection
from streams.kafka.deadletter import SourcePosition

logger = logging.getLogger(__name__)

RebalanceCallback = Callable[[Consumer, list[TopicPartition]], None]

_NOT_NOW = frozenset({
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._WAIT_COORD,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    # The broker's connection was torn down under the request (the broker went away).
    KafkaError._DESTROY_BROKER,
})
_BACKOFF_S = (0.1, 0.25, 0.5, 1.0, 2.0)


def commit_offsets(
    consumer: Consumer, offsets: list[TopicPartition], sleep: Callable[[float], None] = time.sleep
) -> bool:
    """Synchronous commit through a broker outage; False when the group refused it."""
    try:
        until_answered(
            "commit", lambda: consumer.commit(offsets=offsets, asynchronous=False), sleep
        )
        return True
    except Refused as refused:
        error = refused.error
        logger.warning("commit refused code=%s reason=%s", error.code(), error.str())
        return False


def committed_offsets(
    consumer: Consumer, partitions: list[TopicPartition],
    sleep: Callable[[float], None] = time.sleep,
) -> list[TopicPartition]:
    """The group's committed positions, asked again until the broker answers. Rebalance
    callbacks ask for them, and a callback that raised would take its consumer's loop down
    with it, as the first rebalance after an outage would (the coordinator still loading)."""
    try:
        return until_answered(
            "committed", lambda: consumer.committed(partitions, timeout=_ASK_TIMEOUT_S), sleep,
            not_now=ASSIGNED_NOT_KNOWN_YET,
        )
    except Refused as refused:
        raise KafkaException(refused.error) from None


_ASK_TIMEOUT_S = 30.0
_T = TypeVar("_T")


class Refused(Exception):
    """The broker answered "no" (not "not now")."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(error.str())
        self.error = error


ASSIGNED_NOT_KNOWN_YET = frozenset(
    {KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART}
)
"""Answers about partitions the group has just assigned: they exist, so "unknown" only means
the client's metadata has not caught up yet (right after a broker restart): "not now"."""


def until_answered(
    what: str,
    call: Callable[[], _T],
    sleep: Callable[[float], None] = time.sleep,
    not_now: frozenset[int] = frozenset(),
) -> _T:
    """`call()`, retried with backoff while its error says "not now" (or is one of `not_now`);
    an error that says "no" is raised as `Refused`, a fatal one as it came."""
    attempt = 0
    while True:
        try:
            return call()
        except KafkaException as exc:
            error = exc.args[0]
            if not isinstance(error, KafkaError) or error.fatal():
                raise
            code = error.code()
            if code not in _NOT_NOW and code not in not_now and not error.retriable():
                raise Refused(error) from None
            if attempt % 20 == 0:
                logger.warning("%s waits for the broker code=%s attempt=%d",
                               what, error.code(), attempt)
            sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
            attempt += 1


_LEAVE_S = 10.0
"""How long `close` serves the revocation of its partitions before closing anyway."""
_LEAVE_BATCH = 10_000


class BatchConsumer:
    def __init__(
        self,
        connection: KafkaConnection,
        group_id: str,
        topics: Sequence[str],
        auto_offset_reset: str = "earliest",
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        overrides: dict[str, Any] | None = None,
    ) -> None:
        config = {
            **connection.client_config(),
            "group.id": group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": auto_offset_reset,
            "partition.assignment.strategy": "cooperative-sticky",
            # Processing happens between polls; keep the group alive through long batches.
            "max.poll.interval.ms": 300_000,
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 1_000,
            **(overrides or {}),
        }
        self._consumer = Consumer(config)
        callbacks: dict[str, Any] = {}
        if on_assign:
            callbacks["on_assign"] = on_assign
        if on_revoke:
            callbacks["on_revoke"] = on_revoke
        self._consumer.subscribe(list(topics), **callbacks)

    @property
    def raw(self) -> Consumer:
        return self._consumer

    def poll_batch(self, max_messages: int, timeout_s: float) -> list[Message]:
        """Up to `max_messages` records, waiting at most `timeout_s`; broker errors are raised,
        end-of-partition notices are dropped."""
        return self._records(self._consumer.consume(num_messages=max_messages, timeout=timeout_s))

    def poll_ready(self, max_messages: int, wait_s: float, fill_s: float = 0.0) -> list[Message]:
        """Blocks up to `wait_s` for a first record only, then adds what else arrives within
        `fill_s` (0: what is already queued), up to `max_messages`: latency-bound consumers
        never wait for a batch to fill."""
        first = self._consumer.consume(num_messages=1, timeout=wait_s)
        if not first or max_messages == 1:
            return self._records(first)
        rest = self._consumer.consume(num_messages=max_messages - 1, timeout=fill_s)
        return self._records(first + rest)

    def _records(self, messages: list[Message]) -> list[Message]:
        records = []
        for message in messages:
            error = message.error()
            if error is None:
                records.append(message)
            elif error.code() != KafkaError._PARTITION_EOF:
                if error.fatal():
                    raise KafkaException(error)
                logger.warning("consumer error code=%s reason=%s", error.code(), error.str())
        return records

    def commit(self, batch: Sequence[Message]) -> None:
        """Synchronously commit the position after the last record of each partition in `batch`."""
        offsets = next_offsets(batch)
        if offsets:
            commit_offsets(self._consumer, offsets)

    def close(self) -> None:
        """Leaves the group, then closes. The revocation is served by a poll here, not by
        `close`: librdkafka can block for ever when the rebalance callback it runs from inside
        `close` asks for the rebalance protocol (confluentinc/librdkafka#4041), and a consumer
        whose partitions are already revoked has no callback left to run there. Records still
        queued are dropped unread: offsets move only through explicit commits."""
        try:
            self._consumer.unsubscribe()
            deadline = time.monotonic() + _LEAVE_S
            while self._consumer.assignment() and time.monotonic() < deadline:
                self._consumer.consume(num_messages=_LEAVE_BATCH, timeout=0.05)
        except KafkaException as error:  # the broker is away: close says what it can
            logger.warning("consumer could not leave before closing error=%s", error)
        self._consumer.close()


def source_position(message: Message) -> SourcePosition:
    """Where a consumed record lives; only records without an error reach callers."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    if topic is None or partition is None or offset is None:
        raise ValueError("a consumed record has no topic, partition or offset")
    ts_type, ts = message.timestamp()
    return SourcePosition(topic, partition, offset, ts if ts_type and ts >= 0 else None)


def next_offsets(batch: Sequence[Message]) -> list[TopicPartition]:
    """The committable position (last offset + 1) per topic-partition of a batch."""
    latest: dict[tuple[str, int], int] = {}
    for message in batch:
        pos = source_position(message)
        key = (pos.topic, pos.partition)
        latest[key] = max(latest.get(key, -1), pos.offset)
    return [TopicPartition(t, p, o + 1) for (t, p), o in sorted(latest.items())]
