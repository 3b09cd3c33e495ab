"""The monitor's fold step skips and counts what it cannot use, never raising: every hostile
record of its doors, and a valid record the pipeline fails on. The client points at a closed
port; no broker is involved (tests/integration/streams/monitor runs the loop on Kafka)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import pytest
from confluent_kafka import Message
from pydantic import BaseModel, SecretStr

from schemas import encode
from streams.kafka.connection import KafkaConnection
from streams.kafka.deadletter import DeadLetterWriter
from streams.kafka.producer import EventProducer
from streams.monitor.service import MonitorService
from streams.monitor.settings import MonitorSettings
from tests.hostile_corpus import corpus

from .records import response, served_features

# A password of its own: the test needs no stack, so no `streamrec up` secrets either.
NOWHERE = KafkaConnection(
    bootstrap_servers="127.0.0.1:1", sasl_username="monitor", sasl_password=SecretStr("unused")
)


@pytest.fixture
def service() -> Iterator[MonitorService]:
    monitor = MonitorService(MonitorSettings(kafka=NOWHERE, metrics_port=0))
    yield monitor
    monitor.consumer.close()
    monitor.producer.close()


def _invalid(service: MonitorService, topic: str) -> float:
    value = service.metrics.registry.get_sample_value(
        "streamrec_monitor_records_total", {"topic": topic, "outcome": "invalid"}
    )
    return value or 0.0


@pytest.mark.parametrize("topic", ["interactions", "rec.responses"])
def test_every_hostile_record_is_skipped_and_counted(service: MonitorService, topic: str) -> None:
    hostile = corpus("interactions")
    for n, record in enumerate(hostile):
        service._fold(Message(topic=topic, partition=0, offset=n, key=record.key,
                              value=record.value), wall=1_750_000_000.0)
    assert _invalid(service, topic) == len(hostile)


def test_a_valid_record_the_pipeline_fails_on_is_skipped_and_counted(
    service: MonitorService, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object) -> str:
        raise ZeroDivisionError("a bug this record finds")

    monkeypatch.setattr(service.pipeline, "on_response", broken)
    value = encode(response("r1"))
    service._fold(Message(topic="rec.responses", partition=0, offset=0, value=value),
                  wall=1_750_000_000.0)
    assert _invalid(service, "rec.responses") == 1


class _Sent:
    """Keeps what a dead-letter writer produces (no broker behind this test)."""

    def __init__(self) -> None:
        self.records: list[tuple[str, BaseModel]] = []

    def send(self, topic: str, key: object, record: BaseModel) -> None:
        self.records.append((topic, record))


def test_unusable_logged_features_are_dead_lettered_not_raised(service: MonitorService) -> None:
    sent = _Sent()
    service.dead_letters = DeadLetterWriter(cast(EventProducer, sent), "monitor")
    good = served_features("r1")
    short_rows = good.model_copy(update={"n_features": 3})  # 8 floats are not rows of 3
    hostile = [record.value for record in corpus("interactions")]
    for n, value in enumerate([*hostile, encode(short_rows)]):
        service._fold(Message(topic="rec.features", partition=0, offset=n, value=value),
                      wall=1_750_000_000.0)
    assert _invalid(service, "rec.features") == len(hostile) + 1
    assert service.dead_letters.written == len(hostile) + 1
    assert {topic for topic, _ in sent.records} == {"rec.features.dlq"}
    service._fold(Message(topic="rec.features", partition=0, offset=99, value=encode(good)),
                  wall=1_750_000_000.0)
    assert len(service.pipeline.labeller) == 1
