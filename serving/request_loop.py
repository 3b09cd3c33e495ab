"""The scorer's `rec.requests` loop: the shared ContractLoop, tuned for latency.

Three changes to the shared cycle, none weakening its guarantee (a batch's offsets are committed
only after its responses and dead letters are acknowledged):

- Natural batching: the loop blocks for the first request only, then takes whatever else is
  already queued, plus a short fill wait when companions are likely (serving/batch_fill.py).
  Under load the batch is what arrived while the previous one was scored; at low rates a
  request never waits for company.
- Commits after acknowledgement, without waiting for it: a batch's responses leave at once
  (linger 0), and the loop notes how far the producer had sent when the batch was answered.
  Each poll serves the delivery reports already in and commits the answered batches whose
  records are all acknowledged. The request thread never blocks on the broker's round trip,
  which with the feature log's records in flight is often longer than scoring a batch. A batch
  still unacknowledged after `ACK_WAIT_LIMIT_S` (a broker in trouble) is flushed, blocking.
- Paced commits: acknowledged batches are committed together at most every
  `commit_interval_s` (and always, after a flush, on stop or revoke). A commit per micro-batch
  was one OffsetCommit (a log append on the broker) per request at moderate load, broker CPU
  taken from the request path on a shared machine.
A crash re-delivers the batches answered since the last commit, whose answers may then repeat
(consumers dedupe by request_id); none is lost.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaException, Message

from schemas.limits import DEFAULT_MAX_FUTURE_SKEW_S
from schemas.recommendations import RecommendationRequest
from serving.batch_fill import BatchFill
from serving.metrics import ServeMetrics
from streams.kafka.consumer import BatchConsumer, next_offsets
from streams.kafka.contract_loop import ContractLoop, Envelope, RecordRejected
from streams.kafka.deadletter import DeadLetterWriter
from streams.kafka.producer import EventProducer

logger = logging.getLogger(__name__)

IDLE_WAIT_S = 0.1
"""How long one poll blocks for a first request when none is queued (bounds stop latency)."""

ACK_WAIT_LIMIT_S = 5.0
"""Longest an answered batch waits for its acknowledgements before the loop blocks on a flush:
bounds how much a crash re-delivers while the broker is slow."""


@dataclass(frozen=True)
class _Answered:
    """A handled batch, committed once the producer has acknowledged everything up to `mark`."""

    batch: list[Message]
    mark: int
    at: float


class AsyncCommitConsumer(BatchConsumer):
    """Commits without waiting for the broker's acknowledgement of the commit itself.

    Still after the side effects: the loop flushes a batch's responses before committing it, so
    a lost commit (crash right after) only re-delivers requests that were already answered
    (duplicate answers, deduplicated by request_id), never loses one. Not waiting saves a broker
    round trip per micro-batch on the request path."""

    def commit(self, batch: Sequence[Message]) -> None:
        offsets = next_offsets(batch)
        if not offsets:
            return
        try:
            self.raw.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:
            # No coordinator now (a broker outage): the next commit covers these offsets too.
            if exc.args[0].fatal():
                raise
            logger.warning("commit deferred code=%s", exc.args[0].code())


class RequestLoop(ContractLoop[RecommendationRequest]):
    def __init__(
        self,
        metrics: ServeMetrics,
        consumer: BatchConsumer,
        handler: Callable[[list[Envelope[RecommendationRequest]]], list[RecordRejected]],
        producer: EventProducer,
        dead_letters: DeadLetterWriter,
        batch_size: int,
        fill_s: float,
        commit_interval_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        fill_min_expected: float = 0.5,
        max_future_skew_s: float = DEFAULT_MAX_FUTURE_SKEW_S,
    ) -> None:
        super().__init__(
            consumer, RecommendationRequest, handler, producer, dead_letters,
            batch_size=batch_size,  # run_once polls with the fill window, not a batch timeout
            max_future_skew_s=max_future_skew_s,
        )
        self._metrics = metrics
        self._answered: deque[_Answered] = deque()
        """Handled batches, oldest first: answered, not yet committed."""
        self._commit_interval_s = commit_interval_s
        self._clock = clock
        self._committed_at = clock()
        self._fill = BatchFill(fill_s, fill_min_expected, clock=clock)

    def run(self) -> None:
        try:
            super().run()
        finally:
            self.settle()

    def settle(self, force: bool = True) -> None:
        """Commit the answered batches whose records are acknowledged; a no-op when none is.
        Forced at stop and before a rebalance completes: flush, then commit them all. Otherwise
        at most once per commit interval, and never waiting unless the oldest batch has waited
        past ACK_WAIT_LIMIT_S."""
        if not self._answered:
            return
        now = self._clock()
        if not force and now - self._committed_at < self._commit_interval_s:
            return
        if force or now - self._answered[0].at > ACK_WAIT_LIMIT_S:
            self.producer.flush()
            done = list(self._answered)
            self._answered.clear()
        else:
            done = []
            while self._answered and self.producer.acknowledged(self._answered[0].mark):
                done.append(self._answered.popleft())
        if done:
            self.consumer.commit([message for answered in done for message in answered.batch])
            self._committed_at = now

    def run_once(self) -> int:
        batch = self.consumer.poll_ready(self.batch_size, IDLE_WAIT_S, self._fill.window_s())
        self._fill.observed(len(batch))
        self.settle(force=False)
        if not batch:
            return 0
        started = time.perf_counter()
        valid = self._decode(batch)
        rejected = self.handler(valid) if valid else []
        for rejection in rejected:
            env = rejection.envelope
            self._reject(env.key, env.raw, rejection.error, env.position, "apply")
        self.producer.poll(0)  # serve delivery reports without waiting for them
        self._answered.append(_Answered(batch, self.producer.mark(), self._clock()))
        self._count(len(batch), len(batch) - len(valid), len(rejected))
        elapsed = time.perf_counter() - started
        self._metrics.batch_size.observe(len(batch))
        for _ in range(len(batch)):
            self._metrics.latency.observe(elapsed)
        return len(batch)
