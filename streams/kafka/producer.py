"""The one producer every service uses: idempotent, acks=all, bounded buffer with backpressure."""

from __future__ import annotations

import functools
import heapq
import logging
import threading
from typing import Any

from confluent_kafka import KafkaError, Message, Producer
from pydantic import BaseModel

from schemas.deadletter import DeadLetter
from schemas.wire import encode
from streams.kafka.connection import KafkaConnection

logger = logging.getLogger(__name__)

# Room for a dead letter wrapping the largest original it may carry.
_MAX_MESSAGE_BYTES = DeadLetter.WIRE_MAX_BYTES + 64 * 1024


class DeliveryError(RuntimeError):
    """At least one record could not be delivered; the caller must not commit past it."""


class AckWatermark:
    """The highest sequence number through which every record's delivery was reported.

    librdkafka reports deliveries per partition in order, but not in order across partitions
    and topics: reports above a gap wait in a heap until the gap closes."""

    def __init__(self) -> None:
        self.through = 0
        self._above: list[int] = []

    def reported(self, sequence: int) -> None:
        heapq.heappush(self._above, sequence)
        while self._above and self._above[0] == self.through + 1:
            heapq.heappop(self._above)
            self.through += 1


class EventProducer:
    """Thread-safe wrapper over confluent-kafka's Producer with delivery failures surfaced.

    Idempotence (enable.idempotence) makes librdkafka's retries safe: no duplicates and no
    reordering per partition, so a retried send never double-counts downstream.
    """

    def __init__(self, connection: KafkaConnection, **overrides: Any) -> None:
        config = {
            **connection.client_config(),
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "compression.type": "lz4",
            "message.max.bytes": _MAX_MESSAGE_BYTES,
            # A bounded local queue: when full, send() blocks in poll() instead of growing memory.
            "queue.buffering.max.messages": 200_000,
            **overrides,
        }
        self._producer = Producer(config)
        self._lock = threading.Lock()
        self._failures: list[str] = []
        self._closed = False
        self._sequence = 0
        self._watermark = AckWatermark()
        self.delivered = 0

    def send(self, topic: str, key: str | bytes | None, record: BaseModel) -> None:
        self.send_raw(topic, key, encode(record))

    def send_raw(
        self,
        topic: str,
        key: str | bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]] | None = None,
        timestamp_ms: int | None = None,
    ) -> None:
        with self._lock:
            self._sequence += 1
            sequence = self._sequence
        kwargs: dict[str, Any] = {"on_delivery": functools.partial(self._on_delivery, sequence)}
        if headers:
            kwargs["headers"] = headers
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        while True:
            try:
                self._producer.produce(topic, value=value, key=key, **kwargs)
                break
            except BufferError:
                # Backpressure: serve delivery reports until the local queue has room.
                self._producer.poll(0.05)
            except Exception:
                # Refused before it was queued (the caller sees why): nothing of it is in flight.
                with self._lock:
                    self._watermark.reported(sequence)
                raise
        self._producer.poll(0)

    def _on_delivery(self, sequence: int, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            logger.error("delivery failed topic=%s error=%s", msg.topic(), err.str())
        with self._lock:
            if err is None:
                self.delivered += 1
            else:
                self._failures.append(f"{msg.topic()}: {err.str()}")
            self._watermark.reported(sequence)

    def mark(self) -> int:
        """The sequence number of the last record sent, for `acknowledged`."""
        with self._lock:
            return self._sequence

    def acknowledged(self, mark: int) -> bool:
        """Serves the delivery reports already in, without waiting; true once every record sent
        up to `mark` is acknowledged. Raises DeliveryError, as flush does, if one failed."""
        self._producer.poll(0)
        with self._lock:
            failures, self._failures = self._failures, []
            through = self._watermark.through
        if failures:
            raise DeliveryError(f"{len(failures)} records failed: {failures[0]}")
        return through >= mark

    def poll(self, timeout_s: float = 0.0) -> int:
        return int(self._producer.poll(timeout_s))

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until everything sent so far is acknowledged; raise if anything failed. Without
        a timeout this waits through a broker outage: librdkafka retries every record until its
        `message.timeout.ms` and then reports it failed, so the wait still ends."""
        remaining = self._producer.flush(*(() if timeout_s is None else (timeout_s,)))
        with self._lock:
            failures, self._failures = self._failures, []
        if remaining:
            raise DeliveryError(f"{remaining} records still undelivered after {timeout_s}s")
        if failures:
            raise DeliveryError(f"{len(failures)} records failed: {failures[0]}")

    def close(self, timeout_s: float = 30.0) -> None:
        """Flush, then release librdkafka's handle and its broker connections at once (a handle
        left to the garbage collector keeps reconnecting to a broker that may be gone). Raises
        DeliveryError, as flush does, for what could not be delivered; that is dropped."""
        if self._closed:
            return
        self._closed = True
        try:
            self.flush(timeout_s)
        except DeliveryError:
            self._producer.purge()
            raise
        finally:
            self._producer.close()
