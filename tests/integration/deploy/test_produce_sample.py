from __future__ import annotations

import pytest
from typer.testing import CliRunner

from cli.app import app
from schemas import InteractionEvent, decode
from schemas.catalog import CatalogItem
from schemas.topics import CATALOG_ITEMS, INTERACTIONS
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


def test_produce_sample_publishes_every_items_metadata_keyed_by_item(
    kafka: KafkaConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMREC_KAFKA__TOPIC_PREFIX", kafka.topic_prefix)
    result = CliRunner().invoke(
        app, ["produce-sample", "--count", "50", "--items", "40", "--users", "10"]
    )
    assert result.exit_code == 0, result.output
    records = read_all(kafka, kafka.topic(CATALOG_ITEMS), 40)
    items = [decode(CatalogItem, m.value()) for m in records]
    assert sorted(i.item_id for i in items) == sorted(f"i{n}" for n in range(40))
    assert all((m.key() or b"").decode() == i.item_id for m, i in zip(records, items, strict=True))
    # Each item's genre is the category its events carry.
    events = [decode(InteractionEvent, m.value())
              for m in read_all(kafka, kafka.topic(INTERACTIONS), 50)]
    genre = {i.item_id: i.genres for i in items}
    assert all(e.context is not None and genre[e.item_id] == [e.context.category] for e in events)
