"""A Redis that refuses writes for a while (full memory, a failed save, a long script) pauses the
feature worker: nothing is dead-lettered, no offset is committed past what is applied, and once
Redis accepts writes again the worker resumes by itself and ends with exactly the oracle state.

The refusing Redis is one of the test's own: the session's would refuse every other test's writes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from deploy.generators.sample import SampleConfig, SampleGenerator
from deploy.local.settings import LocalStackSettings
from deploy.local.stack import LocalStack
from deploy.local.worker_process import APPLIED, DEAD_LETTERED, WorkerProcess, free_port
from schemas.topics import INTERACTIONS
from streams.kafka.connection import KafkaConnection
from streams.redis.connection import RedisConnection
from tests.integration.streams.feature_worker.feature_state import differences, read_state
from tests.integration.streams.feature_worker.redis_refusals import REFUSALS
from tests.integration.streams.feature_worker.stream_harness import (
    expected_state,
    produce,
    start_worker,
    topic_events,
    wait_until_applied,
    worker_env,
)

PARTITIONS = 4


def _committed(kafka: KafkaConnection, group: str) -> int:
    """Records the group has committed, summed over the partitions (all records are valid)."""
    consumer = Consumer({**kafka.client_config(), "group.id": group})
    try:
        topic = kafka.topic(INTERACTIONS)
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return sum(max(0, tp.offset) for tp in consumer.committed(partitions, timeout=10))
    finally:
        consumer.close()


def _wait_committed(kafka: KafkaConnection, group: str, count: int) -> None:
    deadline = time.monotonic() + 30
    while _committed(kafka, group) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"group {group} did not commit {count} records")
        time.sleep(0.3)


def _wait_for_retries(worker: WorkerProcess, at_least: float) -> None:
    deadline = time.monotonic() + 60
    key = 'streamrec_stream_retries_total{dependency="redis"}'
    while worker.metrics().get(key, 0.0) < at_least:
        if time.monotonic() > deadline:
            raise TimeoutError("the worker did not retry")
        time.sleep(0.1)


def _dead_lettered(worker: WorkerProcess) -> float:
    return sum(v for k, v in worker.metrics().items() if k.startswith(DEAD_LETTERED))


@pytest.fixture
def own_stack(tmp_path: Path) -> Iterator[LocalStack]:
    """A stack whose Redis alone runs (on a port of its own); Kafka is the session's."""
    own = LocalStack(LocalStackSettings(home=tmp_path / "stack", redis_port=free_port()))
    own.redis.start()
    try:
        own.redis.wait_healthy(30)
        yield own
    finally:
        own.redis.stop()


@pytest.mark.parametrize("code", sorted(REFUSALS))
def test_worker_pauses_while_redis_refuses_writes_and_resumes_to_the_oracle_state(
    code: str, own_stack: LocalStack, kafka: KafkaConnection, tmp_path: Path
) -> None:
    s = own_stack.settings
    redis_connection = RedisConnection(
        host=s.host, port=s.redis_port, username="streams", secrets_dir=s.secrets_dir,
        key_prefix=f"test:{uuid.uuid4().hex[:10]}:",
    )  # fmt: skip
    redis_admin = own_stack.redis.admin_client()
    group = f"test-{uuid.uuid4().hex[:8]}"
    worker = start_worker(worker_env(kafka, redis_connection, group=group), tmp_path)
    generator = SampleGenerator(SampleConfig(users=200, items=300, seed=31)).events(800)
    try:
        first = produce(kafka, (next(generator) for _ in range(400)))
        worker.wait_for(first, timeout_s=120)
        _wait_committed(kafka, group, first)
        with REFUSALS[code](own_stack):
            retries = worker.metrics().get('streamrec_stream_retries_total{dependency="redis"}', 0)
            second = produce(kafka, generator)
            _wait_for_retries(worker, at_least=retries + 2)
            time.sleep(1.5)  # past the worker's commit interval (1 s)
            assert worker.metrics()[APPLIED] == first
            assert _committed(kafka, group) == first
            assert _dead_lettered(worker) == 0
        positioned = topic_events(kafka, first + second)
        wait_until_applied(redis_admin, redis_connection, positioned, timeout_s=120)
        worker.wait_for(first + second, timeout_s=60)
        assert _dead_lettered(worker) == 0
        assert worker.alive()
    finally:
        worker.stop()
    assert (
        differences(
            read_state(redis_admin, redis_connection.key_prefix),
            expected_state(redis_connection, positioned),
        )
        == []
    )
