"""The read interface (scorer's read-only user) against features computed from the events."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import redis

from streams.feature_worker.batch import PositionedEvent
from streams.features.feature_set import DENSE_FEATURES
from streams.features.store import RedisFeatureStore
from streams.redis.connection import RedisConnection
from tests.integration.streams.feature_worker.feature_events import (
    apply_in_batches,
    positioned_events,
)


def _in_window(ts: float, as_of: float, bucket_s: int, span: int) -> bool:
    return as_of // bucket_s - span < ts // bucket_s <= as_of // bucket_s


@pytest.fixture
def applied(redis_connection: RedisConnection) -> list[PositionedEvent]:
    events = positioned_events(3000, seed=12, stretch=10.0)
    apply_in_batches(redis_connection, events)
    return events


def test_read_returns_the_users_session_items_and_categories_as_of_a_time(
    applied: list[PositionedEvent], scorer_redis_connection: RedisConnection
) -> None:
    store = RedisFeatureStore.connect(scorer_redis_connection)
    events = [p.event for p in applied]
    user = Counter(e.user_id for e in events).most_common(1)[0][0]
    mine = [e for e in events if e.user_id == user]
    last = mine[-1]
    as_of = max(e.timestamp for e in events)
    items = [*list(dict.fromkeys(e.item_id for e in reversed(mine)))[:5], "never-seen"]

    features = store.read(user, last.session_id, items, as_of=as_of)

    assert features.user.rates.events == len(mine)
    assert features.user.counts.last_24h == sum(
        _in_window(e.timestamp, as_of, 3600, 24) for e in mine
    )
    assert features.user.counts.last_1h == sum(_in_window(e.timestamp, as_of, 60, 60) for e in mine)
    assert [s.item_id for s in features.user.sequence] == [e.item_id for e in reversed(mine)][:50]
    session = [e for e in mine if e.session_id == last.session_id]
    assert features.session.events == len(session)
    assert [s.item_id for s in features.session.sequence] == [e.item_id for e in reversed(session)]
    assert math.isclose(sum(features.user.category_affinity.values()), 1.0)
    first = features.items[0]
    about = [e for e in events if e.item_id == items[0]]
    assert first.rates.views == sum(e.event_type == "view" for e in about)
    assert first.counts.last_7d == sum(_in_window(e.timestamp, as_of, 3600, 168) for e in about)
    assert first.category == about[-1].context.category  # type: ignore[union-attr]
    assert first.category_features is not None
    assert 0.0 < first.rates.ctr < 1.0
    assert not features.items[-1].known
    assert features.newest_event_ts is not None
    assert last.timestamp <= features.newest_event_ts <= as_of

    rows = features.dense()
    assert len(rows) == len(items)
    assert all(len(r) == len(DENSE_FEATURES) and all(math.isfinite(v) for v in r) for r in rows)


def test_categories_passed_by_the_caller_give_the_same_features(
    applied: list[PositionedEvent], scorer_redis_connection: RedisConnection
) -> None:
    store = RedisFeatureStore.connect(scorer_redis_connection)
    event = applied[-1].event
    items = [p.event.item_id for p in applied[-40:]]
    as_of = event.timestamp
    looked_up = store.read(event.user_id, event.session_id, items, as_of=as_of)
    given = {i.item_id: i.category for i in looked_up.items if i.category}
    passed = store.read(event.user_id, event.session_id, items, as_of=as_of, item_categories=given)
    assert passed == looked_up


def test_popular_items_rank_the_last_day_of_interactions(
    applied: list[PositionedEvent], scorer_redis_connection: RedisConnection
) -> None:
    store = RedisFeatureStore.connect(scorer_redis_connection)
    as_of = max(p.event.timestamp for p in applied)
    recent = Counter(
        p.event.item_id for p in applied if _in_window(p.event.timestamp, as_of, 3600, 24)
    )
    top = store.popular_items(10, as_of=as_of)
    assert [count for _, count in top] == sorted(recent.values(), reverse=True)[:10]
    assert all(recent[item] == count for item, count in top)


def test_the_scorer_user_cannot_write_features(
    scorer_redis_connection: RedisConnection,
) -> None:
    with pytest.raises(redis.exceptions.NoPermissionError):
        scorer_redis_connection.client().hset(
            f"{scorer_redis_connection.key_prefix}u:{{x}}", "n", 1
        )
