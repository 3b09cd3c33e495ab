"""The feature worker end to end on the real Kafka and Redis, run as child processes."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import redis

from deploy.generators.sample import SampleConfig, SampleGenerator
from deploy.local.worker_process import APPLIED, DEAD_LETTERED, EVENTS_IN, SKIPPED
from schemas.deadletter import DeadLetter
from schemas.topics import INTERACTIONS, INTERACTIONS_DLQ
from streams.kafka.connection import KafkaConnection
from streams.pacing import Pacer
from streams.redis.connection import RedisConnection
from tests.hostile_corpus import corpus
from tests.integration.kafka_helpers import read_all
from tests.integration.streams.feature_worker.feature_state import (
    differences,
    dump_state,
    read_state,
)
from tests.integration.streams.feature_worker.stream_harness import (
    expected_state,
    produce,
    producer,
    start_worker,
    topic_events,
    wait_until_applied,
    worker_env,
)
from tests.integration.streams.feature_worker.tcp_proxy import TcpProxy


def _sample(count: int, seed: int) -> SampleGenerator:
    return SampleGenerator(SampleConfig(users=400, items=600, seed=seed))


def _dead_letter_total(samples: dict[str, float]) -> float:
    return sum(v for k, v in samples.items() if k.startswith(DEAD_LETTERED))


def test_worker_features_equal_the_oracle_and_hostile_records_are_dead_lettered(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    redis_admin: redis.Redis,
    tmp_path: Path,
) -> None:
    hostile = corpus(INTERACTIONS.name)
    out = producer(kafka)
    events = list(_sample(4000, seed=1).events(4000))
    step = len(events) // len(hostile)
    for i, event in enumerate(events):
        out.send(kafka.topic(INTERACTIONS), event.user_id, event)
        if i % step == 0 and i // step < len(hostile):
            bad = hostile[i // step]
            out.send_raw(kafka.topic(INTERACTIONS), bad.key, bad.value, bad.headers)
    out.flush()
    total = len(events) + len(hostile)

    worker = start_worker(worker_env(kafka, redis_connection), tmp_path)
    try:
        samples = worker.wait_for(total, timeout_s=120)
        assert worker.alive()
    finally:
        worker.stop()

    positioned = topic_events(kafka, total)
    assert (
        differences(
            read_state(redis_admin, redis_connection.key_prefix),
            expected_state(redis_connection, positioned),
        )
        == []
    )
    letters = [
        DeadLetter.model_validate_json(m.value() or b"")
        for m in read_all(kafka, kafka.topic(INTERACTIONS_DLQ), len(hostile))
    ]
    assert sorted((x.original_key or b"", x.original_value or b"") for x in letters) == sorted(
        (h.key or b"", h.value or b"") for h in hostile
    )
    valid_offsets = {(e.partition, e.offset) for e in positioned}
    assert not valid_offsets & {(d.source_partition, d.source_offset) for d in letters}
    # Conservation, from the worker's own metrics.
    assert samples[EVENTS_IN] == samples[APPLIED] + _dead_letter_total(samples) + samples[SKIPPED]
    assert (samples[APPLIED], _dead_letter_total(samples)) == (len(events), len(hostile))


def test_replayed_topic_leaves_state_byte_for_byte_unchanged(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    redis_admin: redis.Redis,
    tmp_path: Path,
) -> None:
    count = produce(kafka, _sample(3000, seed=2).events(3000))
    first = start_worker(worker_env(kafka, redis_connection), tmp_path)
    try:
        first.wait_for(count, timeout_s=120)
    finally:
        first.stop()
    before = dump_state(redis_admin, redis_connection.key_prefix)

    # A new consumer group reads the whole topic again from the beginning.
    replay = start_worker(worker_env(kafka, redis_connection), tmp_path)
    try:
        samples = replay.wait_for(count, timeout_s=120)
    finally:
        replay.stop()

    assert dump_state(redis_admin, redis_connection.key_prefix) == before
    assert (samples[APPLIED], samples[SKIPPED]) == (0, count)
    assert len(before) > 1000


def test_two_workers_in_one_group_reach_the_state_of_one(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    redis_admin: redis.Redis,
    tmp_path: Path,
) -> None:
    env = worker_env(kafka, redis_connection)
    workers = [start_worker(env, tmp_path), start_worker(env, tmp_path)]
    try:
        # Both own half of the 4 partitions before any event exists: each must do its share.
        for w in workers:
            w.wait_assigned(INTERACTIONS.partitions // 2, timeout_s=90)
        count = produce(kafka, _sample(6000, seed=3).events(6000))
        positioned = topic_events(kafka, count)
        wait_until_applied(redis_admin, redis_connection, positioned, timeout_s=180)
        shares = [w.metrics().get(APPLIED, 0.0) for w in workers]
    finally:
        for w in workers:
            w.stop()
    assert (
        differences(
            read_state(redis_admin, redis_connection.key_prefix),
            expected_state(redis_connection, positioned),
        )
        == []
    )
    assert sum(shares) == count
    assert min(shares) > 0


def test_a_worker_joining_mid_stream_takes_half_the_partitions_without_loss(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    redis_admin: redis.Redis,
    tmp_path: Path,
) -> None:
    env = worker_env(kafka, redis_connection)
    first = start_worker(env, tmp_path)
    workers = [first]
    joined, produced = threading.Event(), threading.Event()
    sent: list[int] = [0]

    def produce_paced() -> None:
        # Events flow until the joiner holds its partitions and for 2,000 more after that, however
        # long the joiner takes to start, so it always has work of its own.
        out, pacer, after_join = producer(kafka), Pacer(1_000.0), 0
        for event in _sample(100_000, seed=5).events(100_000):
            pacer.wait()
            out.send(kafka.topic(INTERACTIONS), event.user_id, event)
            sent[0] += 1
            after_join += joined.is_set()
            if after_join >= 2_000:
                break
        out.flush()
        produced.set()

    thread = threading.Thread(target=produce_paced, daemon=True)
    try:
        first.wait_assigned(INTERACTIONS.partitions, timeout_s=90)
        thread.start()
        first.wait_for(1000, timeout_s=60)
        # The rebalance happens while events flow and the first worker holds uncommitted work.
        workers.append(start_worker(env, tmp_path))
        workers[1].wait_assigned(INTERACTIONS.partitions // 2, timeout_s=90)
        joined.set()
        thread.join(timeout=60)
        positioned = topic_events(kafka, sent[0])
        wait_until_applied(redis_admin, redis_connection, positioned, timeout_s=180)
        joined_share = workers[1].metrics().get(APPLIED, 0.0)
    finally:
        joined.set()
        for w in workers:
            w.stop()
    assert produced.is_set()
    assert (
        differences(
            read_state(redis_admin, redis_connection.key_prefix),
            expected_state(redis_connection, positioned),
        )
        == []
    )
    assert joined_share > 0


def test_worker_waits_while_redis_is_unreachable_and_resumes_by_itself(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    redis_admin: redis.Redis,
    tmp_path: Path,
) -> None:
    proxy = TcpProxy(redis_connection.port)
    env = worker_env(kafka, redis_connection, STREAMREC_REDIS__PORT=str(proxy.port))
    worker = start_worker(env, tmp_path)
    generator = _sample(3000, seed=4).events(3000)
    try:
        first = produce(kafka, (next(generator) for _ in range(1000)))
        worker.wait_for(first, timeout_s=120)
        proxy.down()
        second = produce(kafka, (next(generator) for _ in range(1000)))
        _wait_for_retries(worker, at_least=2)
        assert worker.metrics()[APPLIED] == first  # nothing applied, nothing acknowledged
        proxy.up()
        worker.wait_for(first + second, timeout_s=120)

        # Down again, and the worker dies while holding unapplied events: a new one must
        # apply them, so nothing was committed past them.
        proxy.down()
        third = produce(kafka, generator)
        _wait_for_retries(worker, at_least=2)
        worker.kill()
        proxy.up()
        worker = start_worker(env, tmp_path)
        positioned = topic_events(kafka, first + second + third)
        wait_until_applied(redis_admin, redis_connection, positioned, timeout_s=120)
    finally:
        worker.stop()
        proxy.close()
    assert (
        differences(
            read_state(redis_admin, redis_connection.key_prefix),
            expected_state(redis_connection, positioned),
        )
        == []
    )


def _wait_for_retries(worker: object, at_least: int) -> None:
    import time

    from deploy.local.worker_process import WorkerProcess

    assert isinstance(worker, WorkerProcess)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        samples = worker.metrics()
        if samples.get('streamrec_stream_retries_total{dependency="redis"}', 0.0) >= at_least:
            return
        time.sleep(0.2)
    raise TimeoutError(f"worker did not retry: {json.dumps(worker.metrics())[:500]}")
