"""SIGKILL redis-server several times while events stream in at a steady rate, restart it from
its AOF each time: the final state is the oracle's (no event lost, none applied twice).

A restarted Redis may lack writes it had acknowledged: with `appendfsync everysec`, Redis 7.0
answers while it postpones writing its AOF buffer behind a slow fsync, up to two seconds of its
clock (redis_epoch.py). On a fast disk that never happens during a test, so after each kill the
test also cuts the AOF back to its size 0.5, 1 or 2 s before (or leaves it whole), which is what
such a kill loses; the worker must rewind, and the test checks that it did.

A Redis of its own (the local stack's configuration and ACL, another port and directory):
killing the session's Redis would pull it from under the other tests. `REDIS_CHAOS_RUNS` (1 by
default) repeats every rate that many times, each run with its own topics and Redis.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from deploy.generators.sample import SampleConfig, SampleGenerator
from deploy.local.redis import LocalRedis
from deploy.local.worker_process import ASSIGNED, WorkerProcess
from schemas.topics import INTERACTIONS
from streams.feature_worker.batch import PositionedEvent
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

pytestmark = pytest.mark.chaos

RUNS = int(os.environ.get("REDIS_CHAOS_RUNS", "1"))
KILLS = 3
STREAM_S = 9.0
"""How long events flow at the rate; the kills land inside it."""
REWINDS = "streamrec_stream_rewinds_total"


class AofSizes:
    """The incremental AOF's size every 50 ms, to cut it back to an earlier moment."""

    def __init__(self, server: LocalRedis) -> None:
        self._folder = server.dir / "appendonlydir"
        self._sizes: list[tuple[float, Path, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            files = sorted(self._folder.glob("*.incr.aof"), key=lambda p: int(p.name.split(".")[2]))
            if files:
                self._sizes.append((time.monotonic(), files[-1], files[-1].stat().st_size))

    def lose_since(self, moment: float) -> int:
        """Truncates the AOF to what it held at `moment` (monotonic s); the bytes dropped."""
        before = [(path, size) for at, path, size in self._sizes if at <= moment]
        if not before:
            return 0
        path, size = before[-1]
        dropped = max(0, path.stat().st_size - size)
        os.truncate(path, min(size, path.stat().st_size))
        return dropped

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


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


def _wait_assigned(worker: WorkerProcess, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while worker.metrics().get(ASSIGNED, 0.0) < INTERACTIONS.partitions:
        assert worker.alive() and time.monotonic() < deadline, "worker got no partitions"
        time.sleep(0.1)


def _wait_committed(
    kafka: KafkaConnection, group: str, events: list[PositionedEvent], timeout_s: float
) -> None:
    """Until the worker's group has committed past every event (stored only once applied and
    past the durability horizon)."""
    ends: dict[int, int] = {}
    for e in events:
        ends[e.partition] = max(ends.get(e.partition, 0), e.offset + 1)
    topic = kafka.topic(INTERACTIONS)
    reader = Consumer({**kafka.client_config(), "group.id": group, "enable.auto.commit": False})
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            committed = reader.committed([TopicPartition(topic, p) for p in ends], timeout=10)
            if all(tp.offset >= ends[tp.partition] for tp in committed):
                return
            time.sleep(0.5)
    finally:
        reader.close()
    raise TimeoutError(f"group {group} did not commit {ends} within {timeout_s}s")


def _produce_at(kafka: KafkaConnection, rate: float, events: int, done: threading.Event) -> None:
    out = producer(kafka)
    pacer = Pacer(rate)
    topic = kafka.topic(INTERACTIONS)
    stream = SampleGenerator(SampleConfig(users=1500, items=2000, seed=23)).events(events)
    try:
        sent = 0
        while sent < events:
            for _ in range(min(pacer.wait_due(0.01), events - sent)):
                event = next(stream)
                out.send(topic, event.user_id, event)
                sent += 1
        out.flush()
    finally:
        out.close()
    done.set()


@pytest.mark.parametrize("run", range(RUNS))
@pytest.mark.parametrize("rate", [1_000, 5_000])
def test_redis_killed_repeatedly_at_a_steady_rate_ends_in_the_oracle_state(
    kafka: KafkaConnection, own_redis: LocalRedis, tmp_path: Path, rate: int, run: int
) -> None:
    seed = uuid.uuid4().int % 10**6
    rng = random.Random(seed)
    connection = RedisConnection(
        host=own_redis.s.host, port=own_redis.s.redis_port, username="streams",
        secrets_dir=own_redis.s.secrets_dir, key_prefix="sr:crash:",
    )
    admin = own_redis.admin_client()
    events = int(rate * STREAM_S)
    group = f"crash-{uuid.uuid4().hex[:8]}"
    worker = start_worker(worker_env(kafka, connection, group), tmp_path)
    produced = threading.Event()
    aof = AofSizes(own_redis)
    dropped = []
    try:
        _wait_assigned(worker)
        thread = threading.Thread(
            target=_produce_at, args=(kafka, rate, events, produced), daemon=True
        )
        thread.start()
        started = time.monotonic()
        for kill in range(1, KILLS + 1):
            due = started + STREAM_S * kill / (KILLS + 1) + rng.uniform(-0.5, 0.5)
            time.sleep(max(0.0, due - time.monotonic()))
            _sigkill(own_redis)
            dropped.append(aof.lose_since(time.monotonic() - rng.choice([0.0, 0.5, 1.0, 2.0])))
            time.sleep(rng.uniform(0.1, 0.8))  # the worker keeps consuming and retrying
            own_redis.start()
            own_redis.wait_healthy(30)
        thread.join(timeout=120)
        assert produced.is_set()
        positioned = topic_events(kafka, events)
        try:
            # Every event applied, and then committed: a rewind can send a long catch-up batch,
            # whose popularity updates may be in while its other entities' are still going.
            wait_until_applied(admin, connection, positioned, timeout_s=180)
            _wait_committed(kafka, group, positioned, timeout_s=180)
        except TimeoutError as exc:  # say what the worker was doing, not only that it stalled
            raise AssertionError(
                f"{exc}; seed={seed} worker alive={worker.alive()} metrics={worker.metrics()} "
                f"log tail:\n{_tail(tmp_path)}"
            ) from exc
        assert worker.alive()
        rewinds = worker.metrics().get(REWINDS, 0.0)
    finally:
        aof.close()
        worker.stop()
    assert len(positioned) == events
    # A restart the worker wrote to after was seen (a second kill before the worker reconnected
    # to the first restart's Redis needs no rewind of its own: nothing was written there).
    assert 1 <= rewinds <= KILLS, f"seed={seed} rewinds={rewinds}"
    expected = expected_state(connection, positioned)
    diff = differences(read_state(admin, connection.key_prefix), expected)
    assert diff == [], (
        f"seed={seed} rate={rate} aof bytes lost={dropped}\n{diff}\n"
        f"worker log tail:\n{_tail(tmp_path)}"
    )
