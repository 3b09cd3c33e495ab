"""The worker's lean script connection against the real Redis: its ACL user, a connection Redis
drops, and the error classes the pipeline's retry policy depends on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis
from pydantic import SecretStr

from streams.redis.connection import RedisConnection
from streams.redis.script_connection import ScriptConnection


def test_a_connection_redis_drops_is_reopened_by_the_next_call(
    redis_connection: RedisConnection, redis_admin: redis.Redis
) -> None:
    async def run() -> list[object]:
        client = ScriptConnection(redis_connection)
        sha = await client.script_load("return ARGV[1]")
        first = await client.evalsha(sha, 0, "a")
        dropped = await client.execute("CLIENT", "ID")
        redis_admin.client_kill_filter(_id=dropped)
        await asyncio.sleep(0.05)  # the loop sees the connection close
        again = await client.evalsha(sha, 0, "b")
        reopened = await client.execute("CLIENT", "ID")
        await client.aclose()
        return [first, again, reopened != dropped]

    assert asyncio.run(run()) == [b"a", b"b", True]


def test_a_wrong_password_is_a_connection_error_the_worker_waits_on(
    redis_connection: RedisConnection,
) -> None:
    wrong = redis_connection.model_copy(update={"password": SecretStr("not-the-password")})

    async def run() -> None:
        with pytest.raises(redis.AuthenticationError):
            await ScriptConnection(wrong).script_load("return 1")

    asyncio.run(run())
    assert issubclass(redis.AuthenticationError, redis.ConnectionError)


def test_the_scorers_read_only_user_cannot_run_the_feature_script(
    scorer_redis_connection: RedisConnection,
) -> None:
    async def run() -> None:
        client = ScriptConnection(scorer_redis_connection)
        with pytest.raises(redis.exceptions.NoPermissionError):
            await client.script_load("return 1")
        await client.aclose()

    asyncio.run(run())


def _count_within(admin: redis.Redis, key: str, expected: int, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while (count := int(admin.get(key) or 0)) != expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return count


def test_a_pipeline_writes_each_slice_before_the_next_is_built(
    redis_connection: RedisConnection, redis_admin: redis.Redis
) -> None:
    key = f"{redis_connection.key_prefix}u:{{slices}}"
    counted_before_second: list[int] = []

    async def run() -> list[object]:
        client = ScriptConnection(redis_connection)
        sha = await client.script_load("return redis.call('INCR', KEYS[1])")

        def slices() -> Iterator[list[tuple[str | int, ...]]]:
            yield [("EVALSHA", sha, 1, key)] * 3
            # Built while Redis already runs the first slice.
            counted_before_second.append(_count_within(redis_admin, key, 3, 5.0))
            yield [("EVALSHA", sha, 1, key), ("EVALSHA", "0" * 40, 0)]

        replies = await client.pipeline(slices())
        await client.aclose()
        return replies

    try:
        replies = asyncio.run(run())
    finally:
        redis_admin.delete(key)
    assert counted_before_second == [3]
    assert replies[:4] == [1, 2, 3, 4]
    assert isinstance(replies[4], redis.exceptions.NoScriptError)
