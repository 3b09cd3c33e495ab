"""The scorer's consume loops, built from its settings.

- requests: `rec.requests` in the scorers' shared consumer group, the latency-tuned loop of
  serving/request_loop.py; rejects are dead-lettered to `rec.requests.dlq` and, when the
  requester can be identified, answered with an error response;
- control topics (`model.updates`, `kpi.metrics`, `catalog.items`): the shared ContractLoop in a
  fresh group per process start, so each compacted log is read whole and its state rebuilt;
  records are handed over one at a time, so one that fails its contract, or whose handling
  raises, is dead-lettered to `<topic>.dlq` alone and the loop goes on.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import Consumer, TopicPartition
from pydantic import BaseModel

from schemas.topics import REC_REQUESTS
from serving.metrics import ServeMetrics
from serving.request_loop import AsyncCommitConsumer, RequestLoop
from serving.responses import SERVICE, RespondingDeadLetters
from serving.settings import ServeSettings
from streams.kafka.consumer import BatchConsumer
from streams.kafka.contract_loop import ContractLoop, Envelope, RecordRejected, TombstoneHandler
from streams.kafka.deadletter import DeadLetterWriter
from streams.kafka.producer import EventProducer

logger = logging.getLogger(__name__)
R = TypeVar("R", bound=BaseModel)
Rebalance = Callable[[Consumer, list[TopicPartition]], None]


def run_loop(loop: ContractLoop[Any]) -> None:
    """Runs a loop on the current thread; a crash is logged and raised (the thread dies, and
    the scorer's health check brings the process down so its partitions move on)."""
    try:
        loop.run()
    except Exception:
        logger.exception("loop crashed thread=%s", threading.current_thread().name)
        raise


def default_instance() -> str:
    return f"{socket.gethostname()[:40]}-{os.getpid()}"


class Partitions:
    """The `rec.requests` partitions a scorer owns now, tracked from the rebalance callbacks
    (they run on the loop's thread: querying the consumer from another thread would contend
    with its polling). `settle` commits the answered requests of partitions leaving, while they
    are still ours."""

    def __init__(self, instance: str) -> None:
        self.instance = instance
        self.owned: set[int] = set()
        self.settle: Callable[[], None] = lambda: None

    def assigned(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.owned |= {p.partition for p in partitions}
        logger.info("partitions assigned instance=%s partitions=%s", self.instance,
                    sorted(p.partition for p in partitions))

    def revoked(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.settle()
        self.owned -= {p.partition for p in partitions}


def requests_loop(
    settings: ServeSettings,
    metrics: ServeMetrics,
    handler: Callable[[list[Envelope[Any]]], list[RecordRejected]],
    producer: EventProducer,
    dead_letters: RespondingDeadLetters,
    on_assign: Rebalance,
    on_revoke: Rebalance,
) -> RequestLoop:
    kafka = settings.kafka
    # Long polling: the broker answers a parked fetch as soon as a request is appended
    # (fetch.min.bytes 1), so the wait bound adds no latency; a short one (it was 2 ms) only
    # made an idle scorer send ~500 empty fetches/s, broker CPU taken from everyone.
    fetch: dict[str, Any] = {"fetch.wait.max.ms": 100, "fetch.min.bytes": 1}
    consumer = AsyncCommitConsumer(
        kafka, settings.group_id, [kafka.topic(REC_REQUESTS)],
        auto_offset_reset=settings.requests_offset_reset, overrides=fetch,
        on_assign=on_assign, on_revoke=on_revoke,
    )
    return RequestLoop(
        metrics, consumer, handler, producer, dead_letters,
        batch_size=settings.batch_size,
        fill_s=settings.batch_fill_ms / 1000,
        commit_interval_s=settings.commit_interval_ms / 1000,
        fill_min_expected=settings.batch_fill_min_expected,
        max_future_skew_s=settings.max_future_skew_s,
    )


def control_loop(
    settings: ServeSettings,
    instance: str,
    topic: str,
    model: type[R],
    handler: Callable[[list[Envelope[R]]], list[RecordRejected]],
    producer: EventProducer,
    on_tombstone: TombstoneHandler | None = None,
) -> ContractLoop[R]:
    kafka = settings.kafka
    # A fresh group per start: the whole log is read again (the desired state rebuilds).
    group = f"{settings.group_id}.{topic}.{instance}.{uuid.uuid4().hex[:8]}"
    consumer = BatchConsumer(kafka, group, [kafka.topic(topic)], auto_offset_reset="earliest")
    return ContractLoop(
        consumer, model, handler, producer, DeadLetterWriter(producer, SERVICE),
        batch_size=100, batch_timeout_s=0.2, max_future_skew_s=settings.max_future_skew_s,
        # A new model version starts loading the moment its record arrives, not when a batch
        # of 100 filled or 0.2 s passed.
        isolate_records=True, on_tombstone=on_tombstone, fill_batches=False,
    )
