"""The producer reports, without blocking, when everything sent up to a mark is acknowledged."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException

from schemas import encode
from schemas.topics import INTERACTIONS
from streams.kafka.connection import KafkaConnection
from streams.kafka.producer import EventProducer
from tests.contract_examples import examples
from tests.integration.kafka_helpers import read_all


def test_a_mark_is_acknowledged_once_the_broker_holds_every_record_sent_before_it(
    kafka: KafkaConnection,
) -> None:
    topic = kafka.topic(INTERACTIONS)
    producer = EventProducer(kafka, **{"linger.ms": 0})
    value = encode(examples()["InteractionEvent"])
    try:
        for n in range(200):
            producer.send_raw(topic, f"ack-{n}".encode(), value)
        mark = producer.mark()
        deadline = time.monotonic() + 30
        while not producer.acknowledged(mark) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert producer.acknowledged(mark)
        assert not producer.acknowledged(mark + 1)  # nothing sent past the mark yet
        assert producer.delivered >= 200
        keys = {m.key() for m in read_all(kafka, topic, 200)}
        assert keys >= {f"ack-{n}".encode() for n in range(200)}
    finally:
        producer.close()


def test_a_record_refused_before_it_is_queued_does_not_hold_back_later_marks(
    kafka: KafkaConnection,
) -> None:
    topic = kafka.topic(INTERACTIONS)
    producer = EventProducer(kafka, **{"linger.ms": 0})
    try:
        with pytest.raises(KafkaException):
            producer.send_raw(topic, b"too-big", b"x" * (32 << 20))  # past message.max.bytes
        producer.send_raw(topic, b"after", encode(examples()["InteractionEvent"]))
        mark = producer.mark()
        deadline = time.monotonic() + 30
        while not producer.acknowledged(mark) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert producer.acknowledged(mark)
    finally:
        producer.close()
