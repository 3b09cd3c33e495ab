from __future__ import annotations

import pytest
import redis

from deploy.local.settings import LocalStackSettings
from deploy.local.stack import LocalStack
from streams.redis.connection import RedisConnection


def test_second_up_is_harmless_and_starts_nothing(stack: LocalStack) -> None:
    before = {s.name: s.owned_pid for s in stack.status()}
    report = LocalStack(LocalStackSettings()).up()
    assert report.started == ()
    assert {s.name: s.owned_pid for s in report.states} == before
    assert all(s.running for s in report.states)


def test_scorer_user_can_read_but_cannot_write(
    scorer_redis_connection: RedisConnection, redis_connection: RedisConnection
) -> None:
    key = f"{redis_connection.key_prefix}i:{{probe}}"  # a key the feature worker may write
    redis_connection.client().set(key, "1")
    scorer = scorer_redis_connection.client()
    assert scorer.get(key) == b"1"
    with pytest.raises(redis.exceptions.NoPermissionError):
        scorer.set(key, "2")
    with pytest.raises(redis.exceptions.NoPermissionError):
        scorer.eval("return redis.call('SET', KEYS[1], '3')", 1, key)
    assert scorer.get(key) == b"1"


def test_default_user_is_disabled(stack: LocalStack) -> None:
    anonymous = redis.Redis(port=stack.settings.redis_port, socket_timeout=2)
    with pytest.raises(redis.exceptions.AuthenticationError):
        anonymous.ping()


def test_services_cannot_touch_keys_outside_the_namespace(
    redis_connection: RedisConnection,
) -> None:
    with pytest.raises(redis.exceptions.NoPermissionError):
        redis_connection.client().set("elsewhere", "1")


def test_redis_runs_with_the_configured_memory_bound_and_no_eviction(
    stack: LocalStack, redis_admin: redis.Redis
) -> None:
    config = redis_admin.config_get("maxmemory*")
    assert int(str(config["maxmemory"])) == stack.settings.redis_maxmemory_mb * 1024 * 1024
    assert config["maxmemory-policy"] == "noeviction"
