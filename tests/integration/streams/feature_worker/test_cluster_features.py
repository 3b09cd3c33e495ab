"""The feature writer and workers on a 3-master Redis Cluster: the oracle's state, unchanged code.

Every call the writer sends touches the entities of one hash slot; redis-py's cluster pipeline
routes each to its master. Two workers sharing the partitions reach the same state as one.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from deploy.generators.sample import SampleConfig, SampleGenerator
from deploy.local.redis_cluster import LocalRedisCluster
from schemas.events import EventContext, EventType, InteractionEvent
from schemas.topics import INTERACTIONS
from streams.feature_worker.batch import PositionedEvent
from streams.feature_worker.writer import FeatureWriter, ScriptPipeline
from streams.features.keys import FeatureKeys
from streams.kafka.connection import KafkaConnection
from streams.redis.connection import RedisConnection
from streams.redis.resp import Arg
from tests.integration.cluster_nodes import master_of
from tests.integration.streams.feature_worker.feature_events import (
    apply_in_batches,
    oracle_state,
    positioned_events,
)
from tests.integration.streams.feature_worker.feature_state import differences, read_state
from tests.integration.streams.feature_worker.stream_harness import (
    expected_state,
    produce,
    start_worker,
    topic_events,
    wait_until_applied,
    worker_env,
)
from tests.integration.streams.feature_worker.test_feature_writer_properties import (
    STREAMS,
    Draw,
    check_against_oracle,
)

pytestmark = pytest.mark.cluster


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(**STREAMS)
def test_any_stream_on_a_cluster_leaves_the_oracle_state(
    redis_cluster: LocalRedisCluster,
    cluster_connection: RedisConnection,
    draws: list[Draw],
    rewinds: list[tuple[int, int]],
    cuts: list[int],
    call: tuple[int, int],
    popularity_bucket_s: int,
) -> None:
    admin = redis_cluster.connection("admin").client()
    check_against_oracle(
        cluster_connection, admin, draws, rewinds, cuts, call, popularity_bucket_s
    )


def test_the_writer_on_a_cluster_leaves_exactly_the_oracle_state(
    redis_cluster: LocalRedisCluster, cluster_connection: RedisConnection
) -> None:
    events = positioned_events(3000, seed=4, stretch=60.0)
    apply_in_batches(cluster_connection, events, size=300)
    admin = redis_cluster.connection("admin").client()
    actual = read_state(admin, cluster_connection.key_prefix)  # type: ignore[arg-type]
    assert differences(actual, oracle_state(cluster_connection.key_prefix, events).snapshot()) == []
    # The popularity shards, like the entities, are spread over the masters.
    keys = FeatureKeys(cluster_connection.key_prefix)
    assert len({master_of(admin, key) for key in keys.popularity_shards()}) == 3  # type: ignore[arg-type]


def test_two_workers_on_a_cluster_reach_the_oracle_state(
    kafka: KafkaConnection,
    redis_cluster: LocalRedisCluster,
    cluster_connection: RedisConnection,
    tmp_path: Path,
) -> None:
    count = 8000
    produce(kafka, SampleGenerator(SampleConfig(users=800, items=1500, seed=31)).events(count))
    env = worker_env(
        kafka, cluster_connection, group=f"test-{uuid.uuid4().hex[:8]}",
        STREAMREC_REDIS__CLUSTER="true",
    )
    workers = [start_worker(env, tmp_path), start_worker(env, tmp_path)]
    admin = redis_cluster.connection("admin").client()
    try:
        for worker in workers:
            worker.wait_assigned(INTERACTIONS.partitions // 2, timeout_s=90)
        positioned = topic_events(kafka, count)
        wait_until_applied(admin, cluster_connection, positioned, timeout_s=180)  # type: ignore[arg-type]
    finally:
        for worker in workers:
            worker.stop()
    actual = read_state(admin, cluster_connection.key_prefix)  # type: ignore[arg-type]
    assert differences(actual, expected_state(cluster_connection, positioned)) == []


class _Recording:
    """The cluster client, recording how many keys each script call names."""

    def __init__(self, client: ScriptPipeline) -> None:
        self.client = client
        self.keys_per_call: list[int] = []

    def slot(self, key: str) -> int:
        return self.client.slot(key)

    async def pipeline(self, slices: Iterable[Sequence[Sequence[Arg]]]) -> list[Any]:
        commands = [command for piece in slices for command in piece]
        self.keys_per_call += [int(command[2]) for command in commands]
        return await self.client.pipeline([commands])

    async def execute(self, *command: Arg) -> Any:
        return await self.client.execute(*command)

    async def aclose(self) -> None:
        await self.client.aclose()


def test_entities_sharing_a_slot_share_a_call_and_still_reach_the_oracle_state(
    redis_cluster: LocalRedisCluster, cluster_connection: RedisConnection
) -> None:
    """A user, session, item and category with the same id share a hash tag, so one slot: the
    writer packs their updates into one call, which the cluster runs on that slot's master."""
    ids = ["x", "y", "z"]
    now = time.time()
    events = [
        PositionedEvent(n % 2, n // 2, InteractionEvent(
            event_id=f"e{n}", user_id=ids[n % 3], session_id=ids[n % 3], item_id=ids[n // 3 % 3],
            event_type=EventType.VIEW, timestamp=now - 600 + n,
            context=EventContext(category=ids[n // 2 % 3]),
        ))
        for n in range(60)
    ]
    client = _Recording(FeatureWriter.connect(cluster_connection))
    writer = FeatureWriter(client, cluster_connection.key_prefix, call_entities=8)

    async def apply() -> None:
        try:
            for start in range(0, len(events), 20):
                await writer.apply(events[start : start + 20])
        finally:
            await writer.close()

    asyncio.run(apply())
    assert max(client.keys_per_call) > 1
    admin = redis_cluster.connection("admin").client()
    actual = read_state(admin, cluster_connection.key_prefix)  # type: ignore[arg-type]
    assert differences(actual, oracle_state(cluster_connection.key_prefix, events).snapshot()) == []
