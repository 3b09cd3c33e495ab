"""The scorer's feature reads (its lean round trip) against the real Redis, with the scorer's ACL
user."""

from __future__ import annotations

import pytest
import redis

from schemas.recommendations import RecommendationRequest
from serving.feature_reads import FeatureReads
from serving.features import RedisFeatureReader
from streams.features.keys import FeatureKeys, popularity_shard
from streams.redis.connection import RedisConnection, SyncClient

pytestmark = pytest.mark.integration


def pipeline(
    connection: RedisConnection, spin_s: float = 150e-6, password: str | None = None
) -> FeatureReads:
    return FeatureReads(
        (connection.host, connection.port), connection.username,
        password or connection.resolved_password(), timeout_s=5.0, spin_s=spin_s,
    )


def seed(admin: SyncClient, prefix: str) -> None:
    keys = FeatureKeys(prefix)
    admin.hset(keys.user("u1"), mapping={"last_ts": "100.5", "n_view": "3", "n_click": "1"})
    admin.lpush(keys.user_sequence("u1"), "i1 90.000 view", "i2 95.000 click", "i3 100.500 view")
    admin.hset(keys.session("s1"), mapping={"last_ts": "100.5", "n": "2"})
    admin.lpush(keys.session_sequence("s1"), "i2 95.000 click", "i3 100.500 view")
    # Popularity shards as the worker writes them: each item in its own shard.
    for item, hour, score in (("i3", 7, 5), ("i1", 7, 2), ("i2", 6, 8)):
        shard = popularity_shard(item)
        admin.hset(keys.popularity(shard), "mx_h", str(hour))
        admin.zadd(keys.popularity_bucket(shard, hour), {item: score})
    admin.sadd(f"{prefix}cfg:{{serving}}:unavailable", "i9")


def requests() -> list[RecommendationRequest]:
    sent_at = 1_700_000_000.0
    return [
        RecommendationRequest(request_id="r1", user_id="u1", session_id="s1", k=5, sent_at=sent_at),
        RecommendationRequest(request_id="r2", user_id="nobody", k=5, sent_at=sent_at),
    ]


@pytest.mark.parametrize("spin_s", [0.0, 150e-6])
def test_the_lean_round_trip_reads_what_redis_py_reads(
    redis_admin: redis.Redis, redis_prefix: str, scorer_redis_connection: RedisConnection,
    spin_s: float,
) -> None:
    seed(redis_admin, redis_prefix)
    client = scorer_redis_connection.client()
    reference = RedisFeatureReader(client, redis_prefix).read(requests())
    lean = RedisFeatureReader(
        client, redis_prefix, reads=pipeline(scorer_redis_connection, spin_s)
    ).read(requests())
    assert lean == reference
    assert [e.item_id for e in lean.contexts[0].user_events] == ["i1", "i2", "i3"]
    assert lean.popular == [("i3", 5.0), ("i2", 4.0), ("i1", 2.0)]
    assert lean.config.unavailable == frozenset({"i9"})


def test_a_reader_refreshed_on_its_own_thread_never_refreshes_in_a_batch(
    redis_admin: redis.Redis, redis_prefix: str, scorer_redis_connection: RedisConnection
) -> None:
    seed(redis_admin, redis_prefix)
    reads = pipeline(scorer_redis_connection)
    reader = RedisFeatureReader(
        scorer_redis_connection.client(), redis_prefix, reads=reads, refresh_inline=False
    )
    before = reader.read(requests())
    assert before.popular == [] and before.config.unavailable == frozenset()
    reader.refresh()
    after = reader.read(requests())
    assert after.popular == [("i3", 5.0), ("i2", 4.0), ("i1", 2.0)]
    assert after.config.unavailable == frozenset({"i9"})
    redis_admin.sadd(f"{redis_prefix}cfg:{{serving}}:unavailable", "i8")
    assert reader.read(requests()).config.unavailable == frozenset({"i9"})
    reader.refresh()
    assert reader.read(requests()).config.unavailable == frozenset({"i8", "i9"})


def test_an_error_reply_raises_and_the_next_call_still_works(
    redis_admin: redis.Redis, redis_prefix: str, scorer_redis_connection: RedisConnection
) -> None:
    redis_admin.set(f"{redis_prefix}plain", "x")
    reads = pipeline(scorer_redis_connection)
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        reads.execute([("LRANGE", f"{redis_prefix}plain", 0, 1)])
    with pytest.raises(redis.exceptions.NoPermissionError):  # the scorer's user is read-only
        reads.execute([("SET", f"{redis_prefix}plain", "y")])
    assert reads.execute([("GET", f"{redis_prefix}plain")]) == [b"x"]


def test_a_dropped_connection_raises_once_then_reconnects(
    redis_admin: redis.Redis, redis_prefix: str, scorer_redis_connection: RedisConnection
) -> None:
    redis_admin.set(f"{redis_prefix}k", "v")
    reads = pipeline(scorer_redis_connection)
    assert reads.execute([("GET", f"{redis_prefix}k")]) == [b"v"]
    redis_admin.client_kill_filter(user="scorer", skipme=True)
    with pytest.raises(redis.ConnectionError):
        reads.execute([("GET", f"{redis_prefix}k")])
    assert reads.execute([("GET", f"{redis_prefix}k")]) == [b"v"]


def test_a_wrong_password_is_an_authentication_error(
    scorer_redis_connection: RedisConnection,
) -> None:
    with pytest.raises(redis.AuthenticationError):
        pipeline(scorer_redis_connection, password="not-it").execute([("PING",)])
