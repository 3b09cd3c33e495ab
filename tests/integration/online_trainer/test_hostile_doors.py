"""The trainer's doors on the real Kafka: every hostile drift alert lands in `alerts.drift.dlq`,
every hostile interaction is filtered (the feature workers dead-letter those), and the trainer
keeps running."""

from __future__ import annotations

import time
from pathlib import Path

from schemas import DeadLetter, decode, encode
from schemas.ranker_examples import RankerExample
from schemas.topics import (
    ALERTS_DRIFT,
    ALERTS_DRIFT_DLQ,
    INTERACTIONS,
    RANKER_EXAMPLES,
    RANKER_EXAMPLES_DLQ,
)
from streams.kafka.connection import KafkaConnection
from streams.kafka.producer import EventProducer
from tests.contract_examples import examples
from tests.hostile_corpus import Hostile, corpus
from tests.integration.kafka_helpers import read_all
from tests.integration.online_trainer.conftest import train_settings
from tests.integration.online_trainer.test_trainer_service import Running


def _send(kafka: KafkaConnection, topic: str, records: list[Hostile]) -> None:
    producer = EventProducer(kafka)
    for record in records:
        producer.send_raw(kafka.topic(topic), record.key, record.value, record.headers)
    producer.flush()


def test_hostile_alerts_are_dead_lettered_and_hostile_events_filtered_while_training_goes_on(
    kafka: KafkaConnection, tmp_path: Path
) -> None:
    alerts, events = corpus(ALERTS_DRIFT.name), corpus(INTERACTIONS.name)
    _send(kafka, ALERTS_DRIFT.name, alerts)
    _send(kafka, INTERACTIONS.name, events)
    running = Running(train_settings(kafka, tmp_path))
    try:
        loop = running.service.loop
        deadline = time.monotonic() + 60
        while loop.counters.filtered < len(events) and time.monotonic() < deadline:
            time.sleep(0.2)
        letters = [
            decode(DeadLetter, m.value())
            for m in read_all(kafka, kafka.topic(ALERTS_DRIFT_DLQ), len(alerts))
        ]
        assert running.thread.is_alive()
    finally:
        running.close()
    assert (loop.counters.consumed, loop.counters.filtered) == (len(events), len(events))
    assert sorted(x.source_offset for x in letters) == list(range(len(alerts)))
    for letter in letters:
        record = alerts[letter.source_offset]
        assert (letter.original_key, letter.original_value) == (record.key, record.value)
        assert letter.service == "trainer" and letter.stage == "validate"
    assert running.service.retrains == 0


def test_hostile_and_unusable_ranker_examples_are_dead_lettered_while_training_goes_on(
    kafka: KafkaConnection, tmp_path: Path
) -> None:
    hostile = corpus(INTERACTIONS.name)  # not one of them is a ranker example
    _send(kafka, RANKER_EXAMPLES.name, hostile)
    example = examples()["RankerExample"]
    assert isinstance(example, RankerExample)
    unusable = [  # valid records the ranker cannot learn from: another feature set, bad rows
        example.model_copy(update={"request_id": "old-set", "feature_set": "old-set"}),
        example.model_copy(update={"request_id": "bad-rows", "n_features": 5}),
    ]
    producer = EventProducer(kafka)
    for record in unusable:
        producer.send(kafka.topic(RANKER_EXAMPLES), record.user_id, record)
    producer.flush()
    expected = len(hostile) + len(unusable)
    running = Running(train_settings(kafka, tmp_path))
    try:
        letters = [
            decode(DeadLetter, m.value())
            for m in read_all(kafka, kafka.topic(RANKER_EXAMPLES_DLQ), expected)
        ]
        assert running.thread.is_alive()
    finally:
        running.close()
    # Four partitions: offsets repeat across them, the rejected bytes do not.
    assert len(letters) == expected
    applied = {x.original_value for x in letters if x.stage == "apply"}
    assert applied == {encode(record) for record in unusable}
    assert all(x.service == "trainer" for x in letters)
    assert running.service.ranker.published == []
