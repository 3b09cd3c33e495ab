"""The monitor's fold step skips and counts what it cannot use, never raising: every hostile
record of its doors, and a valid record the pipeline fails on. No broker is involved: the
service builds its faust app only when it runs (tests/integration/streams/monitor runs it)."""

from __future__ import annotations

from typing import cast

import pytest
from pydantic import BaseModel, SecretStr

from schemas import encode
from streams.kafka.connection import KafkaConnection
from streams.kafka.deadletter import DeadLetterWriter, RecordSender
from streams.kafka.faust_app import Arrival
from streams.monitor.service import MonitorService
from streams.monitor.settings import MonitorSettings
from tests.hostile_corpus import corpus

from .records import response, served_features

# A password of its own: the test needs no stack, so no `streamrec up` secrets either.
NOWHERE = KafkaConnection(
    bootstrap_servers="127.0.0.1:1", sasl_username="monitor", sasl_password=SecretStr("unused")
)
WALL = 1_750_000_000.0


@pytest.fixture
def service() -> MonitorService:
    return MonitorService(MonitorSettings(kafka=NOWHERE, metrics_port=0))


def arrival(topic: str, offset: int, value: bytes | None, key: bytes | None = None) -> Arrival:
    return Arrival(topic, 0, offset, 0, key, value)


def _invalid(service: MonitorService, topic: str) -> float:
    value = service.metrics.registry.get_sample_value(
        "streamrec_monitor_records_total", {"topic": topic, "outcome": "invalid"}
    )
    return value or 0.0


@pytest.mark.parametrize("topic", ["interactions", "rec.responses"])
def test_every_hostile_record_is_skipped_and_counted(service: MonitorService, topic: str) -> None:
    hostile = corpus("interactions")
    service.fold([arrival(topic, n, r.value, r.key) for n, r in enumerate(hostile)], WALL)
    assert _invalid(service, topic) == len(hostile)
    c = service.counters  # conservation: nothing read is unaccounted for
    assert c.consumed == len(hostile) == c.handled + c.dead_lettered + c.filtered


def test_a_valid_record_the_pipeline_fails_on_is_skipped_and_counted(
    service: MonitorService, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object) -> str:
        raise ZeroDivisionError("a bug this record finds")

    monkeypatch.setattr(service.pipeline, "on_response", broken)
    service.fold([arrival("rec.responses", 0, encode(response("r1")))], WALL)
    assert _invalid(service, "rec.responses") == 1
    assert service.counters.filtered == 1


class _Sent:
    """Keeps what a dead-letter writer produces (no broker behind this test)."""

    def __init__(self) -> None:
        self.records: list[tuple[str, BaseModel]] = []

    def send(self, topic: str, key: object, record: BaseModel) -> None:
        self.records.append((topic, record))


def test_unusable_logged_features_are_dead_lettered_not_raised(service: MonitorService) -> None:
    sent = _Sent()
    service.dead_letters = DeadLetterWriter(cast(RecordSender, sent), "monitor")
    good = served_features("r1")
    short_rows = good.model_copy(update={"n_features": 3})  # 8 floats are not rows of 3
    hostile = [record.value for record in corpus("interactions")]
    values = [*hostile, encode(short_rows)]
    service.fold([arrival("rec.features", n, value) for n, value in enumerate(values)], WALL)
    assert _invalid(service, "rec.features") == len(hostile) + 1
    assert service.dead_letters.written == len(hostile) + 1
    assert service.counters.dead_lettered == len(hostile) + 1
    assert {topic for topic, _ in sent.records} == {"rec.features.dlq"}
    service.fold([arrival("rec.features", 99, encode(good))], WALL)
    assert len(service.pipeline.join) == 1
