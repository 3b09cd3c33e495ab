"""Sample events laid out as Kafka would deliver them, and applying them straight to Redis."""

from __future__ import annotations

import asyncio
import random
import time
import zlib
from collections import deque

from deploy.generators.sample import SampleConfig, SampleGenerator
from streams.feature_worker.batch import KeyTtls, PositionedEvent
from streams.feature_worker.writer import ApplyOutcome, FeatureWriter
from streams.features.definitions import POPULARITY_BUCKET_S
from streams.features.keys import FeatureKeys
from streams.redis.connection import RedisConnection
from tests.feature_oracle import FeatureOracle

PARTITIONS = 4


def positioned_events(count: int, seed: int = 11, stretch: float = 1.0) -> list[PositionedEvent]:
    """Sample events laid out as Kafka would: partitioned by user, offsets in order.

    `stretch` > 1 spreads event times over days (ending about now) and jitters them by up to an
    hour either way, so windows slide, buckets are pruned and some events arrive late.
    """
    events = list(SampleGenerator(SampleConfig(users=300, items=400, seed=seed)).events(count))
    rng = random.Random(seed)
    first = events[0].timestamp
    start = time.time() - (events[-1].timestamp - first) * stretch - 7200
    next_offset = [0] * PARTITIONS
    out = []
    for event in events:
        ts = start + (event.timestamp - first) * stretch + rng.uniform(-3600, 3600) * (stretch > 1)
        partition = zlib.crc32(event.user_id.encode()) % PARTITIONS
        stretched = event.model_copy(update={"timestamp": ts})
        out.append(PositionedEvent(partition, next_offset[partition], stretched))
        next_offset[partition] += 1
    return out


def interleaved(events: list[PositionedEvent], seed: int) -> list[PositionedEvent]:
    """Another arrival order that keeps each partition's offset order (what consumers may see)."""
    rng = random.Random(seed)
    queues = [deque(e for e in events if e.partition == p) for p in range(PARTITIONS)]
    out: list[PositionedEvent] = []
    while any(queues):
        queue = rng.choice([q for q in queues if q])
        for _ in range(min(len(queue), rng.randint(1, 60))):
            out.append(queue.popleft())
    return out


def apply_in_batches(
    connection: RedisConnection,
    events: list[PositionedEvent],
    size: int = 250,
    ttls: KeyTtls = KeyTtls(),
) -> ApplyOutcome:
    async def run() -> ApplyOutcome:
        writer = FeatureWriter(FeatureWriter.connect(connection), connection.key_prefix, ttls)
        applied = skipped = 0
        try:
            for start in range(0, len(events), size):
                outcome = await writer.apply(events[start : start + size])
                applied, skipped = applied + outcome.applied, skipped + outcome.skipped
        finally:
            await writer.close()
        return ApplyOutcome(applied, skipped)

    return asyncio.run(run())


def oracle_state(
    prefix: str, events: list[PositionedEvent], popularity_bucket_s: int = POPULARITY_BUCKET_S
) -> FeatureOracle:
    oracle = FeatureOracle(FeatureKeys(prefix), popularity_bucket_s)
    oracle.apply_all(events)
    return oracle
