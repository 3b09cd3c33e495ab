"""The item state the scorer reads per candidate is what the offline features see at that time."""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest
import redis

from models.point_in_time import InteractionLog, item_state_features
from serving.features import RedisFeatureReader
from serving.item_state_table import ItemStateTable, PackedStateReads
from streams.feature_worker.batch import PositionedEvent
from streams.features.keys import FeatureKeys
from streams.redis.connection import RedisConnection
from tests.integration.serving.test_read_pipeline import pipeline
from tests.integration.streams.feature_worker.feature_events import (
    apply_in_batches,
    positioned_events,
)

pytestmark = pytest.mark.integration


def _whole_seconds(events: list[PositionedEvent]) -> list[PositionedEvent]:
    """The offline log counts time in whole seconds (as ML-100K does)."""
    return [
        PositionedEvent(p.partition, p.offset, p.event.model_copy(
            update={"timestamp": float(math.floor(p.event.timestamp))}))
        for p in events
    ]


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


def test_the_table_follows_the_item_hashes_in_the_background(
    redis_admin: redis.Redis, scorer_redis_connection: RedisConnection
) -> None:
    prefix = scorer_redis_connection.key_prefix
    keys = FeatureKeys(prefix)
    items = [f"i{n}" for n in range(1200)]  # three chunks
    for n, item in enumerate(items[:600]):
        redis_admin.hset(keys.item(item), mapping={"first_ts": f"{n}.000", "last_ts": "900.500",
                                                   "n_view": "2"})
    reader = RedisFeatureReader(scorer_redis_connection.client(), prefix)
    packed = PackedStateReads(pipeline(scorer_redis_connection), keys)
    table = ItemStateTable(reads_per_s=50_000.0)
    table.load(reader.item_states, items)
    assert len(table) == 1200
    for fast, plain in zip(packed(items[590:610]), reader.item_states(items[590:610]), strict=True):
        np.testing.assert_array_equal(fast, plain)
    first, last, events = table.states(["i7", "i1000", "elsewhere"])
    np.testing.assert_array_equal(first, [7.0, np.nan, np.nan])
    np.testing.assert_array_equal(last, [900.5, np.nan, np.nan])
    np.testing.assert_array_equal(events, [2.0, 0.0, 0.0])
    redis_admin.hset(keys.item("i1000"), mapping={"first_ts": "950.000", "last_ts": "951.000",
                                                  "n_purchase": "1"})
    stop = threading.Event()
    refresh = threading.Thread(target=table.refresh, args=(packed, stop))
    refresh.start()
    try:
        deadline = time.monotonic() + 10
        while table.states(["i1000"])[2][0] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        refresh.join(timeout=5)
    assert not refresh.is_alive()
    assert [a[0] for a in table.states(["i1000"])] == [950.0, 951.0, 1.0]
