from __future__ import annotations

import pytest
from typer.testing import CliRunner

from cli.app import app
from schemas import InteractionEvent, decode
from schemas.topics import INTERACTIONS
from streams.kafka.connection import KafkaConnection
from tests.integration.kafka_helpers import read_all


def test_produce_sample_publishes_valid_events_keyed_by_user(
    kafka: KafkaConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMREC_KAFKA__TOPIC_PREFIX", kafka.topic_prefix)
    result = CliRunner().invoke(app, ["produce-sample", "--count", "300", "--rate", "3000"])
    assert result.exit_code == 0, result.output
    records = read_all(kafka, kafka.topic(INTERACTIONS), 300)
    assert len(records) == 300
    events = [decode(InteractionEvent, m.value()) for m in records]
    assert all((m.key() or b"").decode() == e.user_id for m, e in zip(records, events, strict=True))
    assert len({e.event_id for e in events}) == 300
