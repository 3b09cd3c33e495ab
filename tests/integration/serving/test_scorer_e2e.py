"""The scorer end to end on the real Kafka and Redis: requests in, answers out."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis

from models.point_in_time import SERVING_FEATURE_NAMES, SERVING_FEATURE_SET
from schemas.deadletter import DeadLetter
from schemas.ranker_examples import ServedFeatures
from schemas.topics import REC_FEATURES, REC_REQUESTS, REC_REQUESTS_DLQ
from schemas.wire import decode
from serving.features import ServingKeys
from serving.service import ScorerService
from streams.features.definitions import POPULARITY_BUCKET_S
from streams.kafka.connection import KafkaConnection
from streams.kafka.producer import EventProducer
from streams.redis.connection import RedisConnection
from tests.integration.kafka_helpers import read_all
from tests.integration.serving.helpers import (
    FeatureFeed,
    ask,
    events,
    model_update,
    publish,
    request,
    responses,
    running,
    save_model,
    send_requests,
    serving_version,
    settings,
    wait_for,
)

pytestmark = pytest.mark.e2e
CROWD_SPAN_S = 13.0
"""The crowd's views reach this far back (its busiest user views 12 items, a second apart)."""


def popular_traffic(feed: FeatureFeed) -> None:
    """Ten users' views of i100, i101, ... stamped over the last 12 s, all in one popularity
    bucket: one straddling a bucket's start would count its oldest views at half weight."""
    into_bucket = time.time() % POPULARITY_BUCKET_S
    if into_bucket < CROWD_SPAN_S:
        time.sleep(CROWD_SPAN_S - into_bucket)
    batch = []
    for n in range(10):
        batch.extend(events(f"crowd{n}", [f"i{100 + m}" for m in range(n + 3)]))
    feed.ingest(batch)


def test_answers_carry_version_and_freshness_and_follow_the_users_latest_events(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    scorer_redis_connection: RedisConnection,
    redis_admin: redis.Redis,
    tmp_path: Path,
) -> None:
    feed = FeatureFeed(kafka, redis_connection)
    popular_traffic(feed)
    feed.ingest(events("u1", ["i1", "i2", "i3", "i4", "i5"]))
    publish(kafka, model_update(save_model(tmp_path, "1.0"), "1.0"))
    service = ScorerService(settings(kafka, scorer_redis_connection, tmp_path))
    with running(service):
        assert wait_for(lambda: serving_version(service) == "1.0")

        first = ask(kafka, request("u1", k=20))
        assert first.status == "ok" and first.strategy == "model"
        assert first.model_version == "1.0"
        assert first.feature_freshness_ms is not None and first.model_freshness_ms is not None
        top = [i.item_id for i in first.items]
        assert len(top) == 20
        assert not set(top) & {"i1", "i2", "i3", "i4", "i5"}  # already seen

        unavailable = top[:3]
        redis_admin.sadd(ServingKeys(redis_connection.key_prefix).unavailable, *unavailable)
        time.sleep(0.2)  # beyond config_refresh_s: the scorer has re-read the unavailable set
        excluded = top[3:6]
        second = ask(kafka, request("u1", k=20, exclude_items=excluded))
        assert not {i.item_id for i in second.items} & {*unavailable, *excluded}
        assert len(second.items) == 20

        feed.ingest(events("u1", ["i200", "i201", "i202"]))
        third = ask(kafka, request("u1", k=20))
        moved = [i.item_id for i in third.items]
        assert moved != [i.item_id for i in second.items]
        assert not set(moved) & {"i200", "i201", "i202", *unavailable}

    # Each model-served answer logged its ranking stage's input for the ranker's training data.
    logged = [decode(ServedFeatures, m.value())
              for m in read_all(kafka, kafka.topic(REC_FEATURES), 3)]
    assert {f.request_id for f in logged} == {first.request_id, second.request_id,
                                             third.request_id}
    for record in logged:
        assert record.feature_set == SERVING_FEATURE_SET
        assert record.strategy == "retrieval_order" and record.model_version == "1.0"
        assert record.matrix().shape == (len(record.candidates), len(SERVING_FEATURE_NAMES))
        assert len(record.shown) == 20


def test_feature_freshness_is_the_pipelines_lag_not_the_age_of_backfilled_history(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    scorer_redis_connection: RedisConnection,
    tmp_path: Path,
) -> None:
    """A user whose newest event is 30 days old in event time but entered Kafka just now has
    fresh features: a start-up backfill must not read as a stale pipeline (the monitor alerts
    above 60 s)."""
    feed = FeatureFeed(kafka, redis_connection)
    popular_traffic(feed)
    month_ago = time.time() - 30 * 86_400
    feed.ingest(events("backfilled", ["i1", "i2", "i3"], start=month_ago))
    publish(kafka, model_update(save_model(tmp_path, "1.0"), "1.0"))
    service = ScorerService(settings(kafka, scorer_redis_connection, tmp_path))
    with running(service):
        assert wait_for(lambda: serving_version(service) == "1.0")
        answer = ask(kafka, request("backfilled", k=5))
    assert answer.status == "ok"
    assert answer.feature_freshness_ms is not None
    assert answer.feature_freshness_ms < 60_000


def test_unknown_users_get_recent_popularity(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    scorer_redis_connection: RedisConnection,
    tmp_path: Path,
) -> None:
    popular_traffic(FeatureFeed(kafka, redis_connection))
    service = ScorerService(settings(kafka, scorer_redis_connection, tmp_path))
    with running(service):
        answer = ask(kafka, request("nobody", k=3, session_id=None))
    assert answer.status == "ok" and answer.strategy == "popularity"
    assert [i.item_id for i in answer.items] == ["i100", "i101", "i102"]


def test_bad_requests_get_error_answers_and_dead_letters_while_serving_goes_on(
    kafka: KafkaConnection, scorer_redis_connection: RedisConnection, tmp_path: Path
) -> None:
    producer = EventProducer(kafka)
    topic = kafka.topic(REC_REQUESTS)
    out_of_range = {"request_id": "bad-k", "user_id": "u9", "k": 9999, "sent_at": time.time()}
    producer.send_raw(topic, b"u9", json.dumps(out_of_range).encode())
    producer.send_raw(topic, b"u9", b"{this is not json")
    producer.flush()
    good = request("u9")
    send_requests(kafka, [good])
    service = ScorerService(settings(kafka, scorer_redis_connection, tmp_path))
    with running(service):
        answers = {r.request_id: r for r in responses(kafka, 2)}
    assert set(answers) == {"bad-k", good.request_id}
    error = answers["bad-k"].error
    assert answers["bad-k"].status == "error" and error is not None
    assert error.code == "invalid_request" and "k" in error.message
    assert answers[good.request_id].status == "ok"
    dlq = read_all(kafka, kafka.topic(REC_REQUESTS_DLQ), 2)
    letters = [decode(DeadLetter, m.value()) for m in dlq]
    assert sorted(d.error_class for d in letters) == ["MalformedJson", "SchemaViolation"]
    assert service.requests_loop.counters.consumed == 3


def test_two_scorers_in_one_group_answer_every_request_exactly_once(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    scorer_redis_connection: RedisConnection,
    tmp_path: Path,
) -> None:
    feed = FeatureFeed(kafka, redis_connection)
    feed.ingest(events("u1", ["i1", "i2"]))
    publish(kafka, model_update(save_model(tmp_path, "1.0"), "1.0"))
    a = ScorerService(settings(kafka, scorer_redis_connection, tmp_path, instance="a"))
    b = ScorerService(settings(kafka, scorer_redis_connection, tmp_path, instance="b"))
    with running(a), running(b):
        assert wait_for(
            lambda: all(s.partitions for s in (a, b)) and len(a.partitions | b.partitions) == 4
        )
        sent = [request(f"user{n}") for n in range(200)]
        send_requests(kafka, sent)
        answered = responses(kafka, len(sent))
    ids = [r.request_id for r in answered]
    assert sorted(ids) == sorted(r.request_id for r in sent)  # all, and none twice
    assert all(r.status == "ok" for r in answered)
    handled = [s.requests_loop.counters.handled for s in (a, b)]
    assert all(h > 0 for h in handled) and sum(handled) == len(sent)
