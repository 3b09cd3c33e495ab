"""The scorer follows `catalog.items` on the real Kafka: the content features it logs come from
the metadata published there, an item its version does not know gets the last place of an
answer when it matches the user's genres, a tombstone deletes an item's record, and a record
that breaks the contract is dead-lettered."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from models.point_in_time import SERVING_FEATURE_NAMES
from schemas.catalog import CatalogItem
from schemas.deadletter import DeadLetter
from schemas.ranker_examples import ServedFeatures
from schemas.topics import CATALOG_ITEMS, CATALOG_ITEMS_DLQ, REC_FEATURES
from schemas.wire import decode
from serving.service import ScorerService
from streams.kafka.connection import KafkaConnection
from streams.kafka.producer import EventProducer
from streams.redis.connection import RedisConnection
from tests.integration.kafka_helpers import read_all
from tests.integration.serving.helpers import (
    ITEMS,
    FeatureFeed,
    ask,
    events,
    model_update,
    publish,
    request,
    running,
    save_model,
    serving_version,
    settings,
    wait_for,
)

pytestmark = pytest.mark.e2e

HISTORY = ["i1", "i2", "i3", "i4", "i5"]


def _genres(item: str) -> list[str]:
    """Drama for the history and every third item; the others Comedy."""
    n = int(item[1:])
    return ["Drama"] if item in HISTORY or n % 3 == 0 else ["Comedy"]


def test_the_catalog_topic_feeds_content_and_new_items_deletes_and_dead_letters_bad_records(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    scorer_redis_connection: RedisConnection,
    tmp_path: Path,
) -> None:
    producer = EventProducer(kafka)
    topic = kafka.topic(CATALOG_ITEMS)
    producer.send_raw(topic, b"i7", b'{"item_id": "i7", "genres": "Drama"}')
    for item in ITEMS:
        producer.send(topic, item, CatalogItem(item_id=item, genres=_genres(item),
                                               release_year=1990, updated_at=time.time()))
    for item, genre in (("new-drama", "Drama"), ("new-western", "Western")):
        producer.send(topic, item, CatalogItem(item_id=item, genres=[genre],
                                               updated_at=time.time()))
    producer.flush()
    FeatureFeed(kafka, redis_connection).ingest(events("u1", HISTORY))
    publish(kafka, model_update(save_model(tmp_path, "1.0"), "1.0"))
    service = ScorerService(settings(kafka, scorer_redis_connection, tmp_path))
    with running(service):
        assert wait_for(lambda: serving_version(service) == "1.0")
        assert wait_for(lambda: len(service.catalog) == len(ITEMS) + 2)
        answer = ask(kafka, request("u1", k=20))
        placed = service.metrics.registry.get_sample_value("streamrec_serve_new_items_total")
        producer.send_raw(topic, b"new-drama", None)
        producer.send_raw(topic, b"bad key\xff", None)
        producer.flush()
        assert wait_for(lambda: len(service.catalog) == len(ITEMS) + 1)
        after_delete = ask(kafka, request("u1", k=20))
    assert answer.status == "ok" and answer.strategy == "model"
    assert placed == 1
    shown = [i.item_id for i in answer.items]
    assert len(shown) == 20 and shown[-1] == "new-drama" and "new-western" not in shown

    record = decode(ServedFeatures, read_all(kafka, kafka.topic(REC_FEATURES), 1)[0].value())
    matrix = record.matrix()
    match = matrix[:, SERVING_FEATURE_NAMES.index("genre_match_recent")]
    history = matrix[:, SERVING_FEATURE_NAMES.index("genre_match_history")]
    drama = np.array([_genres(i) == ["Drama"] for i in record.candidates])
    assert drama.any() and (~drama).any()
    np.testing.assert_allclose(match[drama], 1.0, rtol=1e-6)
    np.testing.assert_array_equal(match[~drama], 0.0)
    np.testing.assert_array_equal(history, match)
    np.testing.assert_array_equal(matrix[:, SERVING_FEATURE_NAMES.index("year_gap_recent")], 0.0)

    # A tombstone deleted "new-drama"'s record: the scorer knows nothing of it any more.
    assert after_delete.status == "ok"
    assert "new-drama" not in [i.item_id for i in after_delete.items]

    dead = [decode(DeadLetter, m.value())
            for m in read_all(kafka, kafka.topic(CATALOG_ITEMS_DLQ), 2)]
    assert [(d.original_key, d.original_value is None, d.stage) for d in dead] == [
        (b"i7", False, "validate"), (b"bad key\xff", True, "validate"),
    ]

