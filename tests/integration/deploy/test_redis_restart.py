"""Features written by the feature script come back when Redis restarts from its AOF.

A Redis of its own (same configuration and ACL as the local stack, another port and directory):
restarting the session's Redis would pull it from under the other tests.
"""

from __future__ import annotations

import asyncio

from deploy.generators.sample import SampleConfig, SampleGenerator
from deploy.local.redis import LocalRedis
from deploy.local.settings import LocalStackSettings
from streams.feature_worker.batch import PositionedEvent
from streams.feature_worker.writer import FeatureWriter
from streams.redis.connection import RedisConnection

PREFIX = "sr:restart:"


def _write_features(settings: LocalStackSettings) -> None:
    connection = RedisConnection(
        host=settings.host, port=settings.redis_port, username="streams",
        secrets_dir=settings.secrets_dir, key_prefix=PREFIX,
    )
    generated = SampleGenerator(SampleConfig(users=20, items=200)).events(200)
    events = [PositionedEvent(0, n, event) for n, event in enumerate(generated)]

    async def apply() -> None:
        client = FeatureWriter.connect(connection)
        writer = FeatureWriter(client, PREFIX)
        for start in range(0, len(events), 16):
            await writer.apply(events[start : start + 16])
        await client.aclose()

    asyncio.run(apply())


def _snapshot(server: LocalRedis) -> dict[bytes, bytes]:
    client = server.admin_client()
    keys = sorted(client.scan_iter(match=f"{PREFIX}*", count=1000))
    return {key: client.dump(key) for key in keys}  # type: ignore[misc]


def test_features_written_by_the_script_survive_a_restart(own_redis: LocalRedis) -> None:
    _write_features(own_redis.s)
    before = _snapshot(own_redis)
    assert len(before) > 100
    own_redis.stop()  # a clean shutdown writes the AOF out
    own_redis.start()
    own_redis.wait_healthy(30)
    assert _snapshot(own_redis) == before
    assert "NOPERM" not in own_redis.log_file.read_text()
