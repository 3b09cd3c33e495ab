"""Producing to, and reading back from, the real topics; starting workers; the expected state."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import cast

import redis

from deploy.local.worker_process import WorkerProcess
from schemas.events import InteractionEvent
from schemas.topics import INTERACTIONS
from schemas.wire import ContractError, decode
from streams.feature_worker.batch import PositionedEvent
from streams.features.keys import FeatureKeys
from streams.kafka.connection import KafkaConnection
from streams.kafka.producer import EventProducer
from streams.redis.connection import RedisConnection
from tests.feature_oracle import FeatureOracle, Snapshot
from tests.integration.kafka_helpers import read_all


def producer(kafka: KafkaConnection) -> EventProducer:
    return EventProducer(kafka)


def produce(kafka: KafkaConnection, events: Iterable[InteractionEvent]) -> int:
    out = producer(kafka)
    n = 0
    for event in events:
        out.send(kafka.topic(INTERACTIONS), event.user_id, event)
        n += 1
    out.flush()
    return n


def topic_events(kafka: KafkaConnection, expected: int) -> list[PositionedEvent]:
    """The valid events of `interactions` with their positions, as the workers will see them."""
    records = read_all(kafka, kafka.topic(INTERACTIONS), expected, timeout_s=60)
    positioned = []
    for m in sorted(records, key=lambda m: (m.partition(), m.offset())):
        try:
            positioned.append(
                PositionedEvent(
                    int(m.partition() or 0),
                    int(m.offset() or 0),
                    decode(InteractionEvent, m.value()),
                )
            )
        except ContractError:
            continue
    return positioned


def expected_state(redis_connection: RedisConnection, events: list[PositionedEvent]) -> Snapshot:
    oracle = FeatureOracle(FeatureKeys(redis_connection.key_prefix))
    oracle.apply_all(events)
    return oracle.snapshot()


def worker_env(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    group: str | None = None,
    **extra: str,
) -> dict[str, str]:
    return {
        "STREAMREC_KAFKA__TOPIC_PREFIX": kafka.topic_prefix,
        "STREAMREC_REDIS__KEY_PREFIX": redis_connection.key_prefix,
        "STREAMREC_REDIS__PORT": str(redis_connection.port),
        "STREAMREC_REDIS__SECRETS_DIR": str(redis_connection.secrets_dir.resolve()),
        "STREAMREC_GROUP_ID": group or f"test-{uuid.uuid4().hex[:8]}",
        "STREAMREC_SESSION_TIMEOUT_S": "6",
        "STREAMREC_RETRY_MAX_S": "1",
        "STREAMREC_LOG_LEVEL": "WARNING",
        **extra,
    }


def start_worker(env: dict[str, str], log_dir: Path) -> WorkerProcess:
    log_dir.mkdir(parents=True, exist_ok=True)
    return WorkerProcess(env, log_dir / f"worker-{uuid.uuid4().hex[:6]}.log").start()


def wait_until_applied(
    admin: redis.Redis, connection: RedisConnection, events: list[PositionedEvent], timeout_s: float
) -> None:
    """Until the global hash says every partition's last valid offset is applied.

    Whichever worker did it, and however often it restarted: the applied offsets of the
    popularity shards are the truth.
    """
    last: dict[int, int] = {}
    for e in events:
        last[e.partition] = max(last.get(e.partition, -1), e.offset)
    shards = FeatureKeys(connection.key_prefix).popularity_shards()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        applied: dict[str, int] = {}
        for key in shards:  # a partition's newest event is in the shard of its item
            fields = cast(dict[bytes, bytes], admin.hgetall(key))
            for k, v in fields.items():
                if k.startswith(b"_p"):
                    applied[k.decode()] = max(applied.get(k.decode(), -1), int(v))
        if all(applied.get(f"_p{p}", -1) >= o for p, o in last.items()):
            return
        time.sleep(0.25)
    raise TimeoutError(f"not all partitions applied within {timeout_s}s: want {last}")
