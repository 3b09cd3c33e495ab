"""The pipeline's reactions to Redis faults, with stand-ins for Redis and the producer (the real
services are exercised by the integration tests; these pin down the decision logic)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from pydantic import BaseModel
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import (
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisError,
    ResponseError,
)
from redis.exceptions import TimeoutError as RedisTimeoutError

from schemas.events import EventType, InteractionEvent
from schemas.wire import encode
from streams.feature_worker.batch import PositionedEvent
from streams.feature_worker.metrics import StreamMetrics
from streams.feature_worker.pipeline import Backoff, FeaturePipeline, SourceRecord
from streams.feature_worker.writer import (
    FUNCTION,
    MERGED,
    ApplyOutcome,
    FeatureWriter,
    is_transient_reply,
)
from streams.kafka.deadletter import DeadLetterWriter
from streams.redis.resp import reply_error


class _Producer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None]] = []

    def send_raw(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        self.sent.append((topic, value))

    def send(self, topic: str, key: bytes | None, record: BaseModel) -> None:
        self.send_raw(topic, key, encode(record))

    def flush(self, timeout_s: float = 30.0) -> None:
        pass


class _Writer:
    """Fails with the given errors first, then applies; rejects batches holding `poison`."""

    def __init__(self, failures: list[Exception], poison: str | None = None) -> None:
        self.failures = failures
        self.poison = poison
        self.calls = 0
        self.sizes: list[int] = []

    async def apply(self, batch: Sequence[PositionedEvent]) -> ApplyOutcome:
        self.calls += 1
        self.sizes.append(len(batch))
        if self.failures:
            raise self.failures.pop(0)
        if any(p.event.item_id == self.poison for p in batch):
            raise ResponseError("ERR user_script:1: something the script cannot handle")
        return ApplyOutcome(len(batch), 0)


def _record(offset: int, item: str) -> SourceRecord:
    event = InteractionEvent(
        event_id=f"e{offset}",
        user_id="u",
        session_id="s",
        item_id=item,
        event_type=EventType.VIEW,
        timestamp=time.time(),
    )
    return SourceRecord("interactions", 0, offset, b"u", encode(event))


def _pipeline(
    writer: _Writer, chunk_events: int = 64
) -> tuple[FeaturePipeline, _Producer, StreamMetrics]:
    producer, metrics = _Producer(), StreamMetrics()
    pipeline = FeaturePipeline(
        writer,  # type: ignore[arg-type]
        DeadLetterWriter(producer, "test"),  # type: ignore[arg-type]
        producer,  # type: ignore[arg-type]
        metrics,
        Backoff(0.001, 0.002),
        chunk_events,
    )
    return pipeline, producer, metrics


def test_an_unreachable_redis_is_retried_until_the_batch_applies() -> None:
    writer = _Writer([RedisConnectionError("down"), ResponseError("BUSY"), RedisTimeoutError()])
    pipeline, producer, metrics = _pipeline(writer)
    outcome = asyncio.run(pipeline.process([_record(1, "i1"), _record(2, "i2")]))
    assert outcome == ApplyOutcome(2, 0)
    assert writer.calls == 4
    assert producer.sent == []
    assert (
        metrics.registry.get_sample_value("streamrec_stream_retries_total", {"dependency": "redis"})
        == 3
    )


def test_a_full_read_only_or_forbidding_redis_is_waited_for_not_dead_lettered() -> None:
    # What redis-py raises for "OOM ...", "READONLY ..." and "NOPERM ..." replies: the code
    # stripped, a class per code. Dead-lettering valid events because Redis is full or its ACL
    # is wrong would lose them for the features; the worker waits, as for an unreachable Redis.
    full = OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")
    read_only = ReadOnlyError("You can't write against a read only replica.")
    refused = NoPermissionError("this user has no permissions to run the 'evalsha' command")
    writer = _Writer([full, read_only, refused])
    pipeline, producer, metrics = _pipeline(writer)
    outcome = asyncio.run(pipeline.process([_record(1, "i1"), _record(2, "i2")]))
    assert outcome == ApplyOutcome(2, 0)
    assert writer.sizes == [2, 2, 2, 2]
    assert producer.sent == []
    assert (
        metrics.registry.get_sample_value("streamrec_stream_retries_total", {"dependency": "redis"})
        == 3
    )


# Redis 7.0's own reply texts: each says "not now", none says anything about the batch.
NOT_NOW_REPLIES = {
    "MISCONF": "MISCONF Errors writing to the AOF file: No space left on device",
    "OOM": "OOM command not allowed when used memory > 'maxmemory'.",
    "LOADING": "LOADING Redis is loading the dataset in memory",
    "BUSY": "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN "
    "NOSCRIPT.",
}


@pytest.mark.parametrize("code", sorted(NOT_NOW_REPLIES))
def test_a_redis_that_cannot_write_now_is_classified_transient(code: str) -> None:
    error = reply_error(NOT_NOW_REPLIES[code])
    # LOADING is a ConnectionError in redis-py (retried as an unreachable Redis); the others are
    # replies the writer must recognise.
    if isinstance(error, ResponseError):
        assert is_transient_reply(error)
    else:
        assert isinstance(error, RedisConnectionError)


@pytest.mark.parametrize("code", sorted(NOT_NOW_REPLIES))
def test_a_redis_that_cannot_write_now_is_waited_for_not_dead_lettered(code: str) -> None:
    failures: list[Exception] = [reply_error(NOT_NOW_REPLIES[code]) for _ in range(3)]
    writer = _Writer(failures)
    pipeline, producer, metrics = _pipeline(writer)
    outcome = asyncio.run(pipeline.process([_record(1, "i1"), _record(2, "i2")]))
    assert outcome == ApplyOutcome(2, 0)
    assert writer.sizes == [2, 2, 2, 2]
    assert producer.sent == []
    assert (
        metrics.registry.get_sample_value("streamrec_stream_retries_total", {"dependency": "redis"})
        == 3
    )


def test_a_script_error_is_not_mistaken_for_a_transient_reply() -> None:
    error: RedisError = reply_error("ERR user_script:1: attempt to compare nil with number")
    assert isinstance(error, ResponseError)
    assert not is_transient_reply(error)


def test_a_batch_redis_rejects_is_split_and_only_the_culprit_dead_lettered() -> None:
    pipeline, producer, metrics = _pipeline(_Writer([], poison="bad"))
    outcome = asyncio.run(pipeline.process([_record(1, "i1"), _record(2, "bad"), _record(3, "i3")]))
    assert outcome == ApplyOutcome(2, 0)
    assert [topic for topic, _ in producer.sent] == ["interactions.dlq"]
    assert b'"stage":"apply"' in (producer.sent[0][1] or b"")
    assert (
        metrics.registry.get_sample_value(
            "streamrec_stream_events_dead_lettered_total", {"stage": "apply"}
        )
        == 1
    )


def test_a_large_batch_is_applied_in_bounded_script_calls() -> None:
    writer = _Writer([])
    pipeline, _, _ = _pipeline(writer, chunk_events=4)
    outcome = asyncio.run(pipeline.process([_record(n, f"i{n}") for n in range(10)]))
    assert outcome == ApplyOutcome(10, 0)
    assert writer.sizes == [4, 4, 2]


def test_a_rejected_chunk_is_isolated_without_touching_the_other_chunks() -> None:
    writer = _Writer([], poison="bad")
    pipeline, producer, _ = _pipeline(writer, chunk_events=3)
    records = [_record(n, "bad" if n == 4 else f"i{n}") for n in range(9)]
    outcome = asyncio.run(pipeline.process(records))
    assert outcome == ApplyOutcome(8, 0)
    # chunk 1 whole, chunk 2 rejected then one call per event, chunk 3 whole
    assert writer.sizes == [3, 3, 1, 1, 1, 3]
    assert len(producer.sent) == 1


class _ScriptlessRedis:
    """Answers "Function not found" until the library is loaded, like an empty Redis."""

    def __init__(self) -> None:
        self.loaded: set[str] = set()

    @staticmethod
    def slot(key: str) -> int:
        return 0

    async def pipeline(self, slices: Iterable[Sequence[Sequence[Any]]]) -> list[Any]:
        return [
            [MERGED] * int(command[2]) if command[1] in self.loaded
            else ResponseError("Function not found")
            for command in itertools.chain.from_iterable(slices)
        ]

    async def execute(self, *command: Any) -> Any:
        assert command == ("FUNCTION", "LOAD", "REPLACE", FUNCTION.code)
        self.loaded.add(FUNCTION.name)
        return FUNCTION.name


def test_the_writer_loads_its_function_library_where_redis_has_none() -> None:
    event = InteractionEvent(
        event_id="e",
        user_id="u",
        session_id="s",
        item_id="i",
        event_type=EventType.VIEW,
        timestamp=time.time(),
    )
    writer = FeatureWriter(_ScriptlessRedis(), "t:")  # type: ignore[arg-type]
    outcome = asyncio.run(writer.apply([PositionedEvent(0, 0, event)]))
    assert outcome == ApplyOutcome(1, 0)


def test_freshness_is_the_pipelines_lag_not_the_age_of_backfilled_history() -> None:
    """An event from last month that entered Kafka a moment ago is fresh: the histogram measures
    record time to applied, so a backfill does not read as a stale pipeline."""
    month_old = InteractionEvent(
        event_id="old",
        user_id="u",
        session_id="s",
        item_id="i1",
        event_type=EventType.VIEW,
        timestamp=time.time() - 30 * 86_400,
    )
    just_sent = SourceRecord(
        "interactions", 0, 1, b"u", encode(month_old), int(time.time() * 1000)
    )
    pipeline, _, metrics = _pipeline(_Writer([]))
    asyncio.run(pipeline.process([just_sent]))
    seconds = "streamrec_stream_freshness_seconds"
    assert metrics.registry.get_sample_value(f"{seconds}_count") == 1
    assert (metrics.registry.get_sample_value(f"{seconds}_sum") or 0.0) < 60.0
