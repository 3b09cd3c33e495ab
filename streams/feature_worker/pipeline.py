"""One batch, end to end: validate -> apply in Redis -> dead-letter the rejects -> metrics.

The caller acknowledges (and so lets the consumer commit) a batch only after `process` returned:
by then every valid event is applied and every rejected one is durably in the dead-letter topic.
While Redis or Kafka is unavailable, `process` waits with capped exponential back-off on the
event loop (never blocking it), so the consumer keeps its group membership and simply stops
advancing until the dependency is back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from operator import attrgetter
from typing import NamedTuple, TypeVar, cast

import numpy as np
import numpy.typing as npt
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from schemas.events import InteractionEvent
from schemas.interaction_decoder import decode_interactions
from schemas.limits import DEFAULT_MAX_FUTURE_SKEW_S
from schemas.wire import ContractError, decode
from streams.feature_worker.batch import Interaction, PositionedEvent, entered_ms
from streams.feature_worker.metrics import StreamMetrics
from streams.feature_worker.writer import ApplyOutcome, FeatureWriter, is_transient_reply
from streams.kafka.deadletter import DeadLetterWriter, SourcePosition, Stage
from streams.kafka.producer import DeliveryError, EventProducer

logger = logging.getLogger(__name__)

T = TypeVar("T")
Floats = npt.NDArray[np.float64]


class SourceRecord(NamedTuple):
    """A record as read from Kafka, before any parsing (a named tuple: a batch builds
    thousands)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None = None

    def position(self) -> SourcePosition:
        return SourcePosition(self.topic, self.partition, self.offset, self.timestamp_ms)


_VALUE = attrgetter("value")
_PARTITION = attrgetter("partition")
_OFFSET = attrgetter("offset")
_TIMESTAMP_MS = attrgetter("timestamp_ms")


@dataclass(frozen=True)
class Rejected:
    record: SourceRecord
    error: BaseException
    stage: Stage


@dataclass(frozen=True)
class Backoff:
    initial_s: float
    max_s: float


class FeaturePipeline:
    def __init__(
        self,
        writer: FeatureWriter,
        dead_letters: DeadLetterWriter,
        producer: EventProducer,
        metrics: StreamMetrics,
        backoff: Backoff,
        chunk_events: int,
        max_future_skew_s: float = DEFAULT_MAX_FUTURE_SKEW_S,
    ) -> None:
        self._writer = writer
        self._max_future_skew_s = max_future_skew_s
        self._chunk = chunk_events
        self._dead_letters = dead_letters
        self._producer = producer
        self._metrics = metrics
        self._backoff = backoff

    async def process(self, records: Sequence[SourceRecord]) -> ApplyOutcome:
        started = time.perf_counter()
        self._metrics.events_in.inc(len(records))
        valid, rejected = validate(records, self._max_future_skew_s)
        outcome, failed = await self._apply(valid)
        await self._dead_letter(rejected + failed)
        self._observe(valid, outcome)
        self._metrics.batch_seconds.observe(time.perf_counter() - started)
        return outcome

    async def close(self) -> None:
        await self._writer.close()

    async def _apply(
        self, valid: list[tuple[SourceRecord, PositionedEvent]]
    ) -> tuple[ApplyOutcome, list[Rejected]]:
        """Applies the batch one chunk (one pipelined round trip) at a time. Chunks already
        applied when a later one fails stay applied: their entities' applied offsets make a
        retry skip them."""
        applied = skipped = 0
        failed: list[Rejected] = []
        for start in range(0, len(valid), self._chunk):
            outcome, rejected = await self._apply_chunk(valid[start : start + self._chunk])
            applied, skipped = applied + outcome.applied, skipped + outcome.skipped
            failed.extend(rejected)
        return ApplyOutcome(applied, skipped), failed

    async def _apply_chunk(
        self, valid: list[tuple[SourceRecord, PositionedEvent]]
    ) -> tuple[ApplyOutcome, list[Rejected]]:
        events = [event for _, event in valid]
        try:
            return await self._retrying(lambda: self._writer.apply(events), "redis"), []
        except ResponseError as exc:
            logger.error("chunk rejected by redis, isolating events error=%s", type(exc).__name__)
        # A reply that retrying cannot fix: apply one by one so only the culprits are rejected.
        # Each entity's call folds before writing anything, so a failed call wrote nothing, and
        # entities already written are protected by their applied offsets.
        applied = skipped = 0
        failed: list[Rejected] = []
        for record, event in valid:
            try:
                one = await self._retrying(partial(self._writer.apply, [event]), "redis")
            except ResponseError as exc:
                failed.append(Rejected(record, exc, "apply"))
                continue
            applied, skipped = applied + one.applied, skipped + one.skipped
        return ApplyOutcome(applied, skipped), failed

    async def _dead_letter(self, rejected: list[Rejected]) -> None:
        if not rejected:
            return
        delay = self._backoff.initial_s
        while True:
            # Re-sent as a whole after a failed flush: a duplicate dead letter, never a lost one.
            for r in rejected:
                self._dead_letters.write(
                    r.record.key, r.record.value, r.error, r.record.position(), r.stage
                )
            try:
                await asyncio.to_thread(self._producer.flush, 30.0)
                break
            except DeliveryError as exc:
                logger.warning("dead letters undelivered error=%s retry_in_s=%.2f", exc, delay)
                self._metrics.retries.labels("kafka").inc()
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._backoff.max_s)
        for r in rejected:
            self._metrics.dead_lettered.labels(r.stage).inc()

    async def _retrying(self, call: Callable[[], Awaitable[T]], dependency: str) -> T:
        delay = self._backoff.initial_s
        while True:
            try:
                return await call()
            except (RedisConnectionError, RedisTimeoutError) as exc:
                reason = type(exc).__name__
            except ResponseError as exc:
                if not is_transient_reply(exc):
                    raise
                reason = getattr(exc, "status_code", None) or str(exc).split(" ", 1)[0]
            logger.warning("%s unavailable reason=%s retry_in_s=%.2f", dependency, reason, delay)
            self._metrics.retries.labels(dependency).inc()
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._backoff.max_s)

    def _observe(
        self, valid: list[tuple[SourceRecord, PositionedEvent]], outcome: ApplyOutcome
    ) -> None:
        self._metrics.applied.inc(outcome.applied)
        self._metrics.skipped.inc(outcome.skipped)
        if outcome.skipped:
            return  # re-deliveries: their event time says nothing about today's freshness
        # From the record's Kafka time (when it entered the pipeline), so a backfill of old
        # history measures the pipeline's lag, not the history's age.
        self._metrics.freshness_seconds.observe_many(
            np.maximum(0.0, time.time() - entered_seconds(valid))
        )


def entered_seconds(valid: Sequence[tuple[SourceRecord, PositionedEvent]]) -> Floats:
    """Each event's `entered_ms` in seconds, read with C calls where every record has its Kafka
    time (the worker's records always do)."""
    stamps = [record.timestamp_ms for record, _ in valid]
    entered = None if None in stamps else np.array(stamps, dtype=np.float64)
    if entered is None or not np.all(entered > 0):
        entered = np.array([entered_ms(event) for _, event in valid], dtype=np.float64)
    seconds: Floats = entered / 1000
    return seconds


def validate(
    records: Sequence[SourceRecord],
    max_future_skew_s: float = DEFAULT_MAX_FUTURE_SKEW_S,
    now: float | None = None,
) -> tuple[list[tuple[SourceRecord, PositionedEvent]], list[Rejected]]:
    """Decodes a batch: valid events with their positions, and the rejects with their reasons
    (stage "validate", or "decode" for a failure decode does not promise).

    Each record is read by the contract's msgspec mirror (schemas/interaction_decoder.py), and
    only a record it does not vouch for by the contract itself, whose verdict and error stand:
    the same records pass, with the same values, at a fraction of the cost. `now` is the
    reader's clock (the time of the call unless given)."""
    now = time.time() if now is None else now
    fast = decode_interactions(list(map(_VALUE, records)), now + max_future_skew_s)
    if None not in fast:  # the common case: every record valid, positioned in C calls
        events = cast(list[Interaction], fast)
        return list(zip(records, map(
            PositionedEvent, map(_PARTITION, records), map(_OFFSET, records), events,
            map(_TIMESTAMP_MS, records),
        ), strict=True)), []
    valid: list[tuple[SourceRecord, PositionedEvent]] = []
    rejected: list[Rejected] = []
    for record, mirrored in zip(records, fast, strict=True):
        event: Interaction | None = mirrored
        if event is None:
            try:
                event = decode(InteractionEvent, record.value, max_future_skew_s, now=now)
            except ContractError as exc:
                rejected.append(Rejected(record, exc, "validate"))
                continue
            except Exception as exc:  # decode promises ContractError only; anything else is kept
                logger.exception(
                    "unexpected decode failure partition=%d offset=%d",
                    record.partition, record.offset,
                )
                rejected.append(Rejected(record, exc, "decode"))
                continue
        valid.append(
            (record, PositionedEvent(record.partition, record.offset, event, record.timestamp_ms))
        )
    return valid, rejected
