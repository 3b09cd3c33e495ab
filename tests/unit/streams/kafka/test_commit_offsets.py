"""A commit waits out a broker outage, gives up on one the group refuses, and never hides a
fatal error."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from streams.kafka.consumer import (
    ASSIGNED_NOT_KNOWN_YET,
    Refused,
    commit_offsets,
    committed_offsets,
    until_answered,
)


class ScriptedConsumer:
    def __init__(self, *errors: KafkaError) -> None:
        self.errors = list(errors)
        self.committed: list[TopicPartition] = []

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> Any:
        if self.errors:
            raise KafkaException(self.errors.pop(0))
        self.committed = offsets
        return offsets


OFFSETS = [TopicPartition("t", 0, 7)]


def test_a_commit_during_an_outage_is_retried_until_the_broker_answers() -> None:
    consumer = ScriptedConsumer(
        KafkaError(KafkaError._TRANSPORT), KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE),
        KafkaError(KafkaError._WAIT_COORD), KafkaError(KafkaError._DESTROY_BROKER),
    )
    pauses: list[float] = []
    assert commit_offsets(consumer, OFFSETS, pauses.append)  # type: ignore[arg-type]
    assert consumer.committed == OFFSETS and len(pauses) == 4 and pauses == sorted(pauses)


def test_a_commit_the_group_refuses_is_given_up() -> None:
    consumer = ScriptedConsumer(KafkaError(KafkaError.ILLEGAL_GENERATION))
    assert not commit_offsets(consumer, OFFSETS, lambda _s: None)  # type: ignore[arg-type]
    assert consumer.committed == []


def test_a_fatal_error_is_raised() -> None:
    consumer = ScriptedConsumer(KafkaError(KafkaError._FENCED, fatal=True))
    with pytest.raises(KafkaException):
        commit_offsets(consumer, OFFSETS, lambda _s: None)  # type: ignore[arg-type]


class ScriptedLookup:
    def __init__(self, *errors: KafkaError) -> None:
        self.errors = list(errors)

    def committed(self, partitions: list[TopicPartition], timeout: float) -> Any:
        if self.errors:
            raise KafkaException(self.errors.pop(0))
        return [TopicPartition(tp.topic, tp.partition, 3) for tp in partitions]


def test_committed_positions_are_asked_again_until_the_broker_answers() -> None:
    consumer = ScriptedLookup(KafkaError(KafkaError._TIMED_OUT))
    positions = committed_offsets(consumer, OFFSETS, lambda _s: None)  # type: ignore[arg-type]
    assert [tp.offset for tp in positions] == [3]


def test_a_just_assigned_partition_the_client_does_not_know_yet_is_asked_again() -> None:
    # Right after a broker restart the client's metadata may lag the group's assignment.
    lookup = ScriptedLookup(KafkaError(KafkaError._UNKNOWN_PARTITION))
    pauses: list[float] = []
    answered = committed_offsets(lookup, OFFSETS, pauses.append)  # type: ignore[arg-type]
    assert [tp.offset for tp in answered] == [3] and len(pauses) == 1


def test_an_unknown_partition_is_a_refusal_where_the_caller_did_not_expect_it() -> None:
    calls: list[int] = []

    def lookup() -> None:
        calls.append(1)
        raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))

    with pytest.raises(Refused):
        until_answered("lookup", lookup, lambda _s: None)
    assert calls == [1]
    with pytest.raises(Refused):  # once the retries are over, still "no" where it means no
        until_answered("lookup", _unknown_twice_then_refused(), lambda _s: None,
                       not_now=ASSIGNED_NOT_KNOWN_YET)


def _unknown_twice_then_refused() -> Any:
    errors = [KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_PARTITION,
              KafkaError.TOPIC_AUTHORIZATION_FAILED]

    def call() -> None:
        raise KafkaException(KafkaError(errors.pop(0)))

    return call
