"""Property: whatever the stream, the batch writer leaves exactly the oracle's state in Redis.

Streams are generated with few users, sessions, items and categories (so entities collide within
and across batches), event times out of order over minutes to days (so windows slide and buckets
are pruned), re-deliveries (a partition rewound to an earlier offset, as after a crash), batch
boundaries anywhere, and an entity's events cut into calls of any size.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from dataclasses import dataclass

import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas.events import EventContext, EventType, InteractionEvent
from streams.feature_worker.batch import PositionedEvent
from streams.feature_worker.writer import FeatureWriter
from streams.redis.connection import RedisConnection, SyncClient
from tests.integration.streams.feature_worker.feature_events import oracle_state
from tests.integration.streams.feature_worker.feature_state import differences, read_state

PARTITIONS = 3
_NOW = time.time()
_BASE = _NOW - 9 * 86_400


@dataclass(frozen=True)
class Draw:
    user: int
    session: int
    item: int
    category: int | None
    kind: EventType
    ms: int


EVENT_DRAWS = st.builds(
    Draw,
    user=st.integers(0, 5),
    session=st.integers(0, 2),
    item=st.integers(0, 7),
    category=st.one_of(st.none(), st.integers(0, 3)),
    kind=st.sampled_from(list(EventType)),
    # Either within a few minutes (shared buckets, ties) or anywhere in nine days (pruning).
    ms=st.one_of(st.integers(0, 180_000), st.integers(0, 9 * 86_400_000)),
)


def _positioned(draws: list[Draw]) -> list[PositionedEvent]:
    offsets = [0] * PARTITIONS
    out = []
    for n, d in enumerate(draws):
        partition = d.user % PARTITIONS
        event = InteractionEvent(
            event_id=f"e{n}",
            user_id=f"u{d.user}",
            session_id=f"u{d.user}-s{d.session}",
            item_id=f"i{d.item}",
            event_type=d.kind,
            timestamp=_BASE + d.ms / 1000,
            context=EventContext(category=f"c{d.category}") if d.category is not None else None,
        )
        out.append(PositionedEvent(partition, offsets[partition], event))
        offsets[partition] += 1
    return out


def _delivered(
    events: list[PositionedEvent], rewinds: list[tuple[int, int]]
) -> list[PositionedEvent]:
    """The stream with re-deliveries: at position `at`, the partition of the event there is
    read again from `back` events earlier (its offsets stay in order, as Kafka's would)."""
    out = list(events)
    for at, back in sorted(rewinds, reverse=True):
        if not out or at >= len(out):
            continue
        partition = out[at].partition
        earlier = [e for e in out[: at + 1] if e.partition == partition][-back:]
        out[at + 1 : at + 1] = earlier
    return out


async def _apply(
    connection: RedisConnection,
    stream: list[PositionedEvent],
    cuts: list[int],
    call: tuple[int, int],
    popularity_bucket_s: int,
) -> None:
    call_events, call_entities = call
    writer = FeatureWriter(
        FeatureWriter.connect(connection), connection.key_prefix, call_events=call_events,
        call_entities=call_entities, popularity_bucket_s=popularity_bucket_s,
    )
    bounds = [0, *sorted(c % (len(stream) + 1) for c in cuts), len(stream)]
    try:
        for start, end in itertools.pairwise(bounds):
            await writer.apply(stream[start:end])
    finally:
        await writer.close()


STREAMS = {
    "draws": st.lists(EVENT_DRAWS, min_size=1, max_size=80),
    "rewinds": st.lists(st.tuples(st.integers(0, 120), st.integers(1, 12)), max_size=3),
    "cuts": st.lists(st.integers(0, 400), max_size=8),
    "call": st.tuples(st.integers(1, 6), st.integers(1, 4)),
    "popularity_bucket_s": st.sampled_from([60, 3600]),
}
"""`call`: the writer's bounds per script call (events, entities); `popularity_bucket_s`: the
default hour or a minute (many buckets, pruned within the generated minutes)."""


def check_against_oracle(
    connection: RedisConnection,
    admin: SyncClient,
    draws: list[Draw],
    rewinds: list[tuple[int, int]],
    cuts: list[int],
    call: tuple[int, int],
    popularity_bucket_s: int,
) -> None:
    """Applies the generated stream under a fresh prefix and compares with the oracle."""
    prefix = f"{connection.key_prefix}{uuid.uuid4().hex[:6]}:"
    connection = connection.model_copy(update={"key_prefix": prefix})
    stream = _delivered(_positioned(draws), rewinds)
    try:
        asyncio.run(_apply(connection, stream, cuts, call, popularity_bucket_s))
        expected = oracle_state(prefix, stream, popularity_bucket_s).snapshot()
        assert differences(read_state(admin, prefix), expected) == []  # type: ignore[arg-type]
    finally:
        for key in list(admin.scan_iter(match=f"{prefix}*", count=1000)):
            admin.delete(key)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(**STREAMS)
def test_any_stream_in_any_batches_leaves_the_oracle_state(
    redis_connection: RedisConnection,
    redis_admin: redis.Redis,
    draws: list[Draw],
    rewinds: list[tuple[int, int]],
    cuts: list[int],
    call: tuple[int, int],
    popularity_bucket_s: int,
) -> None:
    check_against_oracle(
        redis_connection, redis_admin, draws, rewinds, cuts, call, popularity_bucket_s
    )
