"""Each service's Redis user writes only its own keys, against the real redis-server."""

from __future__ import annotations

import pytest
import redis

from streams.features.keys import FeatureKeys
from streams.redis.connection import RedisConnection

READERS = ("scorer", "trainer", "monitor")


def _serving_rules(prefix: str) -> str:
    return f"{prefix}cfg:{{serving}}:rules"  # the scorer's business rules (serving/features.py)


def test_the_feature_worker_writes_feature_keys_but_not_the_serving_configuration(
    redis_connection: RedisConnection, redis_admin: redis.Redis
) -> None:
    client = redis_connection.client()
    keys = FeatureKeys(redis_connection.key_prefix)
    for key in (keys.user("u1"), keys.session("s1"), keys.item("i1"), keys.category("c1")):
        assert client.hincrby(key, "n", 1) == 1
    assert client.zincrby(keys.popularity_bucket(0, 7), 1, "i1") == 1.0
    rules = _serving_rules(redis_connection.key_prefix)
    redis_admin.hset(rules, "boost", "1")
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.hset(rules, "boost", "1000")
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.delete(rules)
    # A script runs each command under the caller's key patterns as well.
    with pytest.raises(redis.ResponseError, match=r"NOPERM|can.t access"):
        client.eval("return redis.call('HSET', ARGV[1], 'boost', '1000')", 0, rules)
    assert client.hgetall(rules) == {b"boost": b"1"}  # reading it stays allowed
    assert redis_admin.hget(rules, "boost") == b"1"


@pytest.mark.parametrize("user", READERS)
def test_reading_services_cannot_write_any_key(
    user: str, redis_connection: RedisConnection, redis_admin: redis.Redis
) -> None:
    client = redis_connection.model_copy(update={"username": user}).client()
    keys = FeatureKeys(redis_connection.key_prefix)
    redis_admin.hset(keys.user("u1"), "n", "1")
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.hset(keys.user("u1"), "n", "2")
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.expire(keys.user("u1"), 1)
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.delete(keys.item("i1"))
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.hset(_serving_rules(redis_connection.key_prefix), "boost", "1")
    assert client.hget(keys.user("u1"), "n") == b"1"
