"""The item state the scorer reads per candidate is what the offline features see at that time."""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence

import numpy as np
import pytest
import redis
from pydantic import SecretStr

from models.point_in_time import InteractionLog, item_state_features
from schemas.events import InteractionEvent
from serving.features import RedisFeatureReader, StateArrays
from serving.item_changes import ItemChanges
from serving.item_state_table import ItemStateTable
from streams.feature_worker.batch import PositionedEvent
from streams.features.keys import FeatureKeys
from streams.redis.connection import RedisConnection
from tests.integration.serving.test_feature_reads import pipeline
from tests.integration.streams.feature_worker.feature_events import (
    apply_in_batches,
    positioned_events,
)

pytestmark = pytest.mark.integration


def test_loading_a_versions_items_caches_their_categories_in_the_same_read(
    redis_connection: RedisConnection, scorer_redis_connection: RedisConnection,
    redis_admin: redis.Redis,
) -> None:
    events = positioned_events(300, seed=9)
    apply_in_batches(redis_connection, events)
    items = sorted({p.event.item_id for p in events})
    client = scorer_redis_connection.client()
    prefix = redis_connection.key_prefix
    expected = RedisFeatureReader(client, prefix).categories(items)
    assert expected
    loading = RedisFeatureReader(client, prefix)
    loading.load_items(items)
    keys = FeatureKeys(prefix)
    redis_admin.delete(*(keys.item(i) for i in items))
    assert loading.categories(items) == expected  # from the cache the load filled
    assert RedisFeatureReader(client, prefix).categories(items) == {}


def _whole_seconds(events: list[PositionedEvent]) -> list[PositionedEvent]:
    """The offline log counts time in whole seconds (as ML-100K does)."""
    whole = []
    for p in events:
        assert isinstance(p.event, InteractionEvent)
        event = p.event.model_copy(update={"timestamp": float(math.floor(p.event.timestamp))})
        whole.append(PositionedEvent(p.partition, p.offset, event))
    return whole


def test_the_item_state_the_stream_wrote_gives_the_offline_point_in_time_features(
    redis_connection: RedisConnection, scorer_redis_connection: RedisConnection
) -> None:
    # Spread over days and arriving out of time order: first and last are not arrival order.
    events = _whole_seconds(positioned_events(1500, seed=7, stretch=40.0))
    apply_in_batches(redis_connection, events)
    items = sorted({p.event.item_id for p in events})
    asked = [*items, "never-seen", items[0]]
    client = scorer_redis_connection.client()
    prefix = redis_connection.key_prefix
    states = RedisFeatureReader(client, prefix).item_states(asked)
    lean = RedisFeatureReader(
        client, prefix, reads=pipeline(scorer_redis_connection)
    ).item_states(asked)
    for plain, fast in zip(states, lean, strict=True):
        np.testing.assert_array_equal(fast, plain)
    for loaded, plain in zip(RedisFeatureReader(client, prefix).load_items(asked), states,
                             strict=True):
        np.testing.assert_array_equal(loaded, plain)  # a version's load reads the same
    first_ts, last_ts, counts = (a[:-1] for a in states)  # the last asked item is a repeat
    np.testing.assert_array_equal([a[-1] for a in states], [a[0] for a in states])
    assert np.isnan(first_ts[-1]) and np.isnan(last_ts[-1]) and counts[-1] == 0.0  # never-seen

    index = {item: n + 1 for n, item in enumerate(items)}
    log = InteractionLog.from_events(
        np.array([index[p.event.item_id] for p in events], dtype=np.int64),
        np.array([int(p.event.timestamp) for p in events], dtype=np.int64),
    )
    now = int(time.time()) + 1
    rows = np.array([*index.values(), len(items) + 1], dtype=np.int64)  # the last: no events
    as_of = np.full(len(rows), now, dtype=np.int64)
    first, last = log.first_and_last(rows, as_of)
    count = log.count_between(rows, np.full_like(as_of, log.origin), as_of)
    offline = item_state_features(first, last, count.astype(np.float64), as_of.astype(np.float64))
    online = item_state_features(first_ts, last_ts, counts, np.full(len(rows), float(now)))
    np.testing.assert_array_equal(online, offline)
    assert count.max() > 10 and (first < last).sum() > len(items) // 2


def _changes(connection: RedisConnection) -> ItemChanges:
    address = (connection.host, connection.port)
    return ItemChanges(lambda: [address], FeatureKeys(connection.key_prefix), connection.username,
                       connection.resolved_password(), timeout_s=5.0)


def test_the_table_follows_the_item_hashes_redis_reports_written(
    redis_admin: redis.Redis, scorer_redis_connection: RedisConnection
) -> None:
    prefix = scorer_redis_connection.key_prefix
    keys = FeatureKeys(prefix)
    items = [f"i{n}" for n in range(1200)]  # three chunks
    for n, item in enumerate(items[:600]):
        redis_admin.hset(keys.item(item), mapping={"first_ts": f"{n}.000", "last_ts": "900.500",
                                                   "n_view": "2"})
    reader = RedisFeatureReader(scorer_redis_connection.client(), prefix)
    lean = RedisFeatureReader(scorer_redis_connection.client(), prefix,
                              reads=pipeline(scorer_redis_connection))
    table = ItemStateTable(reads_per_s=50_000.0, chunk=500)
    table.load(reader.item_states, items)
    assert len(table) == 1200
    first, last, events = table.states(["i7", "i1000", "elsewhere"])
    np.testing.assert_array_equal(first, [7.0, np.nan, np.nan])
    np.testing.assert_array_equal(last, [900.5, np.nan, np.nan])
    np.testing.assert_array_equal(events, [2.0, 0.0, 0.0])
    changes = _changes(scorer_redis_connection)
    reads: list[int] = []

    def read(item_ids: Sequence[str]) -> StateArrays:
        reads.append(len(item_ids))
        return lean.item_states(item_ids)

    stop = threading.Event()
    follow = threading.Thread(target=table.follow, args=(read, changes.changed, stop, 0.02))
    follow.start()
    try:
        _wait(lambda: sum(reads) >= 1200)  # the first look cannot tell: everything, once
        redis_admin.hset(keys.item("i1000"), mapping={"first_ts": "950.000",
                                                      "last_ts": "951.000", "n_purchase": "1"})
        _wait(lambda: table.states(["i1000"])[2][0] == 1.0)
    finally:
        stop.set()
        follow.join(timeout=5)
        changes.close()
    assert not follow.is_alive()
    assert [a[0] for a in table.states(["i1000"])] == [950.0, 951.0, 1.0]
    assert reads[:3] == [500, 500, 200] and sum(reads) < 1200 + 10  # then only what changed


def _wait(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.01)


def test_writes_to_item_hashes_are_reported_once_and_a_lost_connection_says_look_again(
    redis_admin: redis.Redis, scorer_redis_connection: RedisConnection
) -> None:
    keys = FeatureKeys(scorer_redis_connection.key_prefix)
    changes = _changes(scorer_redis_connection)
    try:
        assert changes.changed() is None  # not tracking before: anything may have changed
        redis_admin.hset(keys.item("a"), "n_view", 1)
        redis_admin.hincrby(keys.item("a") + ":h", "7", 1)
        redis_admin.hset(keys.item("b}c"), "n_view", 1)
        redis_admin.hincrby(keys.item("only-buckets") + ":h", "7", 1)
        redis_admin.hset(keys.user("a"), "n_view", 1)
        redis_admin.hset(keys.category("a"), "n_view", 1)
        seen: set[str] = set()

        def saw_both() -> bool:
            changed = changes.changed()
            assert changed is not None
            seen.update(changed)
            return len(seen) == 2

        _wait(saw_both)
        assert seen == {"a", "b}c"}
        assert changes.changed() == set()
        for client in redis_admin.client_list():
            if client["user"] == "scorer" and "t" in client["flags"]:  # the tracking one
                redis_admin.client_kill_filter(_id=client["id"])
        redis_admin.hset(keys.item("d"), "n_view", 1)  # while no connection listens
        _wait(lambda: changes.changed() is None)
        redis_admin.hset(keys.item("e"), "n_view", 1)
        _wait(lambda: changes.changed() == {"e"})
    finally:
        changes.close()


def test_where_redis_refuses_change_tracking_the_table_is_kept_current_by_sweeps(
    redis_admin: redis.Redis, scorer_redis_connection: RedisConnection
) -> None:
    prefix = scorer_redis_connection.key_prefix
    keys = FeatureKeys(prefix)
    user, password = f"notrack-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    redis_admin.acl_setuser(user, enabled=True, passwords=[f"+{password}"],
                            keys=[f"{prefix}*"], commands=["+@read", "+@connection",
                                                           "-client|tracking"])
    connection = scorer_redis_connection.model_copy(
        update={"username": user, "password": SecretStr(password)}
    )
    try:
        changes = _changes(connection)
        with pytest.raises(redis.ConnectionError, match="NOPERM"):
            changes.changed()
        reader = RedisFeatureReader(connection.client(), prefix)
        table = ItemStateTable(reads_per_s=50_000.0)
        table.load(reader.item_states, ["x"])
        stop = threading.Event()
        follow = threading.Thread(target=table.follow,
                                  args=(reader.item_states, changes.changed, stop, 0.02))
        follow.start()
        try:
            redis_admin.hset(keys.item("x"), mapping={"first_ts": "5.000", "last_ts": "6.000",
                                                      "n_view": "4"})
            _wait(lambda: table.states(["x"])[2][0] == 4.0)
        finally:
            stop.set()
            follow.join(timeout=5)
            changes.close()
    finally:
        redis_admin.acl_deluser(user)
