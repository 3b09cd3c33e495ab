"""SIGKILL the feature worker at random moments while events flow: nothing lost, nothing twice."""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from pathlib import Path

import pytest
import redis

from deploy.generators.sample import SampleConfig, SampleGenerator
from deploy.local.worker_process import SKIPPED, WorkerProcess, settled
from schemas.topics import INTERACTIONS
from streams.kafka.connection import KafkaConnection
from streams.pacing import Pacer
from streams.redis.connection import RedisConnection
from tests.integration.streams.feature_worker.feature_state import differences, read_state
from tests.integration.streams.feature_worker.stream_harness import (
    expected_state,
    producer,
    start_worker,
    topic_events,
    wait_until_applied,
    worker_env,
)

logger = logging.getLogger(__name__)

EVENTS = 50_000
KILLS = 10
RATE = 1_500.0
"""Production is paced so that it spans the kills: every incarnation finds fresh work."""


def _produce_paced(kafka: KafkaConnection, done: threading.Event) -> None:
    out = producer(kafka)
    pacer = Pacer(RATE)
    topic = kafka.topic(INTERACTIONS)
    for event in SampleGenerator(SampleConfig(users=2000, items=3000, seed=17)).events(EVENTS):
        pacer.wait()
        out.send(topic, event.user_id, event)
    out.flush()
    done.set()


def _run_until_killed(worker: WorkerProcess, rng: random.Random) -> float:
    """Lets the worker settle at least one batch, then kills it a random moment later; returns
    how many re-delivered (already applied) events it skipped until shortly before."""
    deadline = time.monotonic() + 60
    while settled(worker.metrics()) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(rng.uniform(0.1, 1.5))
    skipped = worker.metrics().get(SKIPPED, 0.0)
    worker.kill()
    return skipped


@pytest.mark.chaos
@pytest.mark.long
def test_worker_killed_at_random_moments_ends_with_exactly_the_oracle_state(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    redis_admin: redis.Redis,
    tmp_path: Path,
) -> None:
    seed = uuid.uuid4().int % 10**6
    logger.info("chaos seed=%d", seed)
    rng = random.Random(seed)
    # Static membership: a restarted worker takes its partitions back without waiting for the
    # killed one's session to expire, which keeps ten restarts within a short test.
    env = worker_env(kafka, redis_connection, STREAMREC_INSTANCE_ID="chaos-worker")
    produced = threading.Event()
    thread = threading.Thread(target=_produce_paced, args=(kafka, produced), daemon=True)
    thread.start()
    redelivered = sum(_run_until_killed(start_worker(env, tmp_path), rng) for _ in range(KILLS))
    thread.join(timeout=120)
    assert produced.is_set()

    survivor = start_worker(env, tmp_path)
    try:
        positioned = topic_events(kafka, EVENTS)
        wait_until_applied(redis_admin, redis_connection, positioned, timeout_s=240)
    finally:
        survivor.stop()
    assert len(positioned) == EVENTS
    # Kills landed between applying and committing: later incarnations saw those events again.
    assert redelivered > 0
    assert (
        differences(
            read_state(redis_admin, redis_connection.key_prefix),
            expected_state(redis_connection, positioned),
        )
        == []
    ), f"seed={seed}"
