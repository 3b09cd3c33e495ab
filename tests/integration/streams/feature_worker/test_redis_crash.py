"""SIGKILL Redis while the worker streams into it, restart it from its AOF: the final state is
the oracle's (no event lost, none applied twice).

A Redis of its own (the local stack's configuration and ACL, another port and directory):
killing the session's Redis would pull it from under the other tests.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.generators.sample import SampleConfig, SampleGenerator
from deploy.local.redis import LocalRedis
from deploy.local.settings import LocalStackSettings
from deploy.local.worker_process import APPLIED, free_port
from streams.kafka.connection import KafkaConnection
from streams.redis.connection import RedisConnection
from tests.integration.streams.feature_worker.feature_state import differences, read_state
from tests.integration.streams.feature_worker.stream_harness import (
    expected_state,
    produce,
    start_worker,
    topic_events,
    wait_until_applied,
    worker_env,
)

EVENTS = 30_000
KILLS = 3


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[LocalRedis]:
    server = LocalRedis(LocalStackSettings(home=tmp_path / "redis", redis_port=free_port()))
    server.start()
    try:
        server.wait_healthy(30)
        yield server
    finally:
        server.stop()


def _sigkill(server: LocalRedis) -> None:
    pid = server.state().owned_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while server.state().running and time.monotonic() < deadline:
        time.sleep(0.05)


def _tail(log_dir: Path, lines: int = 40) -> str:
    return "\n".join(
        "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
        for log in sorted(log_dir.glob("worker-*.log"))
    )


def test_redis_killed_mid_stream_and_restarted_from_its_aof_ends_in_the_oracle_state(
    kafka: KafkaConnection, own_redis: LocalRedis, tmp_path: Path
) -> None:
    connection = RedisConnection(
        host=own_redis.s.host, port=own_redis.s.redis_port, username="streams",
        secrets_dir=own_redis.s.secrets_dir, key_prefix="sr:crash:",
    )
    admin = own_redis.admin_client()
    events = SampleGenerator(SampleConfig(users=1500, items=2000, seed=23)).events(EVENTS)
    produce(kafka, events)
    # Small batches: the backlog takes long enough to drain that every kill lands mid-stream.
    worker = start_worker(
        worker_env(kafka, connection, STREAMREC_BATCH_MAX_EVENTS="200"), tmp_path
    )
    try:
        applied_at_kill = []
        for kill in range(1, KILLS + 1):
            worker.wait_for(kill * EVENTS / (KILLS + 2), timeout_s=120)
            applied_at_kill.append(worker.metrics().get(APPLIED, 0.0))
            _sigkill(own_redis)
            time.sleep(0.5)  # the worker keeps consuming and retrying meanwhile
            own_redis.start()
            own_redis.wait_healthy(30)
        positioned = topic_events(kafka, EVENTS)
        try:
            wait_until_applied(admin, connection, positioned, timeout_s=180)
        except TimeoutError as exc:  # say what the worker was doing, not only that it stalled
            raise AssertionError(
                f"{exc}; worker alive={worker.alive()} metrics={worker.metrics()} "
                f"log tail:\n{_tail(tmp_path)}"
            ) from exc
        assert worker.alive()
    finally:
        worker.stop()
    assert applied_at_kill[-1] < EVENTS  # the last kill came before the stream was drained
    expected = expected_state(connection, positioned)
    diff = differences(read_state(admin, connection.key_prefix), expected)
    assert diff == [], f"{diff}\nworker log tail:\n{_tail(tmp_path)}"
