"""The platform's second consume-loop shape: a faust-streaming app, for a service whose state is
windows and joins (the monitor). Everything else runs `ContractLoop` (contract_loop.py).

What the platform fixes here, the same as for `ContractLoop`:
- security: SASL/SCRAM (and TLS) as the service's own principal, from its `KafkaConnection`;
- topics: faust declares nothing (`topic_allow_declare=False`, no leader topic): its tables'
  changelog topics are catalog topics (schemas/topics.py), made by `streamrec topics create` and
  granted to the service's principal like any other (streams/kafka/principals.py);
- records: `Arrival.decode` reads a record through schemas/wire.py; a record that fails its
  contract is dead-lettered (`DeadLetterWriter` on this app's producer) or, for a secondary
  reader, counted as filtered; `LoopCounters` keeps consumed == handled + dead_lettered +
  filtered;
- offsets: `batches` hands the service `take_events` batches and acks a batch's records only
  after the service's handler returned. faust commits acked offsets every
  `broker_commit_interval`, after flushing its producer: outputs, dead letters and table
  changelog writes are acknowledged by the broker before the offsets that caused them;
- state: `StateTable` is a faust table (in memory, recovered from its changelog on assignment)
  written with an explicit partition, the partition of the input record it came from, so a
  partition's state follows the partition through a rebalance;
- shutdown: `run_until` starts the app on its own event loop and stops it (commit, leave the
  group) when the service's stop event is set; a handler error is logged and its batch
  skipped (counted by the service), so no consumer raises out of its loop.

The consumer's fetch loop is faust's own except for one thing: faust hands each fetched record
to its streams through `wait_first(callback, suspend_flow)`, two tasks per record; `_Consumer`
awaits the callback directly while the flow is not suspended (the same order, a third of the
event-loop turns per record), and its statistics skip the per-record bookkeeping (`_Monitor`).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka
from pydantic import BaseModel

from schemas.limits import DEFAULT_MAX_FUTURE_SKEW_S
from schemas.topics import TopicSpec
from schemas.wire import ContractError, decode, encode
from streams.kafka.connection import KafkaConnection
from streams.kafka.contract_loop import LoopCounters
from streams.kafka.deadletter import DeadLetterWriter, SourcePosition

logger = logging.getLogger(__name__)

R = TypeVar("R", bound=BaseModel)
_YIELD_EVERY = 1_000


class _Consumer(faust_aiokafka.Consumer):
    async def _drain_messages(self, fetcher: Any) -> None:
        callback = self.callback
        read_offset = self._read_offset
        while not (self._stopped.is_set() or fetcher._stopped.is_set()):
            if self.suspend_flow.is_set():
                await self.can_resume_flow.wait()
                continue
            handed = 0
            async for tp, message in self.getmany(timeout=1.0):
                last = read_offset[tp]
                if last is None or message.offset >= last:
                    await callback(message)
                    read_offset[tp] = message.offset
                handed += 1
                if handed % _YIELD_EVERY == 0:
                    await asyncio.sleep(0)
            await asyncio.sleep(0)


class _Transport(faust_aiokafka.Transport):
    Consumer = _Consumer


class _Monitor(faust.Monitor):
    """faust's statistics without its per-record bookkeeping (four calls per record); the
    service counts its records itself (`LoopCounters`, its Prometheus metrics)."""

    def on_message_in(self, tp: Any, offset: int, message: Any) -> None:
        return None

    def on_stream_event_in(self, tp: Any, offset: int, stream: Any, event: Any) -> None:
        return None

    def on_stream_event_out(
        self, tp: Any, offset: int, stream: Any, event: Any, state: Any = None
    ) -> None:
        return None

    def on_message_out(self, tp: Any, offset: int, message: Any) -> None:
        return None


class _App(faust.App):
    def _new_transport(self) -> Any:
        return _Transport(self.conf.broker_consumer, self)


def _credentials(connection: KafkaConnection) -> Any:
    context = None
    if connection.uses_tls:
        context = ssl.create_default_context(cafile=connection.ssl_ca_location)
    if connection.uses_sasl:
        username, password = connection.credentials()
        return faust.SASLCredentials(
            username=username, password=password, mechanism=connection.sasl_mechanism,
            ssl_context=context,
        )
    return None if context is None else faust.SSLCredentials(context)


def stream_app(
    connection: KafkaConnection, app_id: str, commit_interval_s: float = 1.0
) -> faust.App:
    """A faust app logged in as `connection`'s principal; `app_id` is its consumer group."""
    brokers = [f"kafka://{host}" for host in connection.bootstrap_servers.split(",")]
    return _App(
        app_id,
        broker=brokers,
        broker_credentials=_credentials(connection),
        broker_client_id=connection.client_id,
        broker_commit_interval=commit_interval_s,
        store="memory://",
        processing_guarantee="at_least_once",
        topic_allow_declare=False,
        topic_disable_leader=True,
        table_standby_replicas=0,
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        producer_compression_type="lz4",
        # As the EventProducer lingers: aiokafka sends each record in a request of its own
        # without it, and the changelog writes of a batch become thousands of requests.
        producer_linger=0.005,
        producer_max_batch_size=1_000_000,
        web_enabled=False,
        autodiscover=False,
        Monitor=_Monitor,
    )


class FaustSender:
    """Sends wire records through the app's producer, which faust flushes before it commits.
    Made before its app (a service's dead-letter writer outlives one app run), bound to it
    when the app is built."""

    def __init__(self) -> None:
        self.app: faust.App | None = None
        self._topics: dict[str, Any] = {}

    def bind(self, app: faust.App) -> None:
        self.app = app
        self._topics = {}

    async def flush(self) -> None:
        """Waits until the broker has acknowledged everything sent so far."""
        if self.app is not None:
            await self.app.producer.flush()

    def send(self, topic: str, key: str | bytes | None, record: BaseModel) -> None:
        self.send_raw(topic, key, encode(record))

    def send_raw(self, topic: str, key: str | bytes | None, value: bytes | None) -> None:
        if self.app is None:
            raise RuntimeError("FaustSender used before its app was built")
        target = self._topics.get(topic)
        if target is None:
            target = self._topics[topic] = self.app.topic(
                topic, key_serializer="raw", value_serializer="raw"
            )
        raw_key = key.encode() if isinstance(key, str) else key
        target.send_soon(key=raw_key, value=value)


@dataclass(frozen=True)
class Arrival:
    """One consumed record and where it came from."""

    key: bytes | None
    value: bytes | None
    position: SourcePosition

    def decode(
        self,
        model: type[R],
        counters: LoopCounters,
        dead_letters: DeadLetterWriter | None,
        max_future_skew_s: float = DEFAULT_MAX_FUTURE_SKEW_S,
    ) -> R | None:
        """The record, or None when it fails its contract: then dead-lettered (stage
        "validate") or, without a writer, counted as filtered."""
        try:
            return decode(model, self.value, max_future_skew_s)
        except ContractError as error:
            self.reject(error, counters, dead_letters, "validate")
            return None

    def reject(
        self,
        error: BaseException,
        counters: LoopCounters,
        dead_letters: DeadLetterWriter | None,
        stage: Any = "apply",
    ) -> None:
        if dead_letters is None:
            counters.filtered += 1
            logger.warning(
                "filtered topic=%s partition=%d offset=%d stage=%s error=%s",
                self.position.topic, self.position.partition, self.position.offset, stage,
                error.kind if isinstance(error, ContractError) else type(error).__name__,
            )
            return
        dead_letters.write(self.key, self.value, error, self.position, stage)
        counters.dead_lettered += 1


def _arrival(event: Any) -> Arrival:
    message = event.message
    position = SourcePosition(
        message.topic, message.partition, message.offset, int(message.timestamp * 1000)
    )
    return Arrival(message.key, message.value, position)


async def batches(
    stream: Any, size: int, within_s: float
) -> AsyncIterator[list[Arrival]]:
    """A faust agent's stream as batches; a batch's records are acked (committable) once the
    consumer of this iterator asks for the next batch."""
    async for events in stream.take_events(size, within=within_s):
        yield [_arrival(e) for e in events]


def consumer_lag(app: faust.App) -> list[tuple[str, int, int]]:
    """(topic, partition, records behind its high watermark) for each assigned partition."""
    consumer: Any = app.consumer
    lags = []
    for tp in consumer.assignment():
        high, read = consumer.highwater(tp), consumer._read_offset.get(tp)
        if high is not None:
            behind = high - (read + 1) if read is not None else high
            lags.append((tp.topic, tp.partition, max(0, behind)))
    return lags


class StateTable:
    """A faust table of bytes written with explicit partitions (the input record's), kept in
    memory and recovered from its changelog topic, a catalog topic."""

    def __init__(self, app: faust.App, connection: KafkaConnection, spec: TopicSpec) -> None:
        changelog = app.topic(
            connection.topic(spec), partitions=spec.partitions, key_serializer="raw",
            value_serializer="raw", compacting=True,
        )
        raw: Any = faust.Schema(
            key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
        )
        self._table = app.Table(
            spec.name, default=None, partitions=spec.partitions, changelog_topic=changelog,
            schema=raw,
        )

    def put(self, partition: int, key: bytes, value: bytes) -> None:
        store: Any = self._table.data  # faust's memory store: a dict and its partitions
        store.data[key] = value
        store._key_partition[key] = partition
        self._table.send_changelog(partition, key, value, "raw", "raw")

    def delete(self, partition: int, key: bytes) -> None:
        store: Any = self._table.data  # faust's memory store: a dict and its partitions
        if store.data.pop(key, None) is None:
            return
        store._key_partition.pop(key, None)
        self._table.send_changelog(partition, key, None, "raw", "raw")  # a tombstone

    def items(self) -> Iterator[tuple[int, bytes, bytes]]:
        """(partition, key, value) of every row this worker holds."""
        store: Any = self._table.data  # faust's memory store: a dict and its partitions
        for key, value in list(store.data.items()):
            if value is not None:
                yield store._key_partition.get(key, -1), key, value

    def on_recovered(self, callback: Callable[[], Any]) -> None:
        """`callback` (a coroutine function) runs after each recovery, once this worker's
        partitions are loaded."""
        self._table.on_recover(callback)


def run_until(
    build: Callable[[], faust.App], stop: threading.Event, poll_s: float = 0.2
) -> None:
    """Builds an app with `build` on a fresh event loop in this thread and runs it until `stop`
    is set, then stops it gracefully (flush, commit, leave the group)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    async def main() -> None:
        app = build()
        await app.start()
        try:
            while not app.should_stop:
                if await asyncio.to_thread(stop.wait, poll_s):
                    break
        finally:
            await app.stop()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
        asyncio.set_event_loop(None)
