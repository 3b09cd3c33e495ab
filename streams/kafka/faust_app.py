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
- batches: `consume_batches` subscribes the app to the service's topics (faust owns the group,
  its co-partitioned assignment, offsets, the tables and their recovery) and hands the service
  each fetch of them whole, as `Arrival`s, to one coroutine: no faust Stream, Event or per-record
  task between the fetch and the service, whose cost per record is then its own loop's. A batch's
  offsets are acked (committable) only after the handler returned; faust commits acked offsets
  every `broker_commit_interval`, after flushing its producer: outputs, dead letters and table
  changelog writes are acknowledged by the broker before the offsets that caused them. Other
  topics (a table's changelog while it recovers) take faust's own per-record path;
- state: `StateTable` is a faust table (in memory, recovered from its changelog on assignment)
  written with an explicit partition, the partition of the input record it came from, so a
  partition's state follows the partition through a rebalance;
- shutdown: `run_until` starts the app on its own event loop and stops it (commit, leave the
  group) when the service's stop event is set; an app that crashed (faust stops an app whose
  commit or send failed, a broker outage) is replaced by a new one after a pause, which resumes
  from the committed offsets and recovers its tables. A handler that raises (its records never
  do: the service skips and counts a record it fails on) is logged, its batch is not acked and
  its partitions are sought back to it, so it is handled again after a pause: no consumer raises
  out of its loop, and no record is skipped unhandled.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import shutil
import ssl
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple, TypeVar

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types.tuples import ack_lock
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
_FETCH_WAIT_S = 1.0
_RETRY_AFTER_S = 1.0
_YOUNG_COLLECTION_EVERY = 50_000
_RESTART_AFTER_S = 1.0
_RESTART_AT_MOST_S = 30.0
_HEALTHY_RUN_S = 60.0
_STOP_AT_MOST_S = 20.0


class Arrival(NamedTuple):
    """One consumed record and where it came from (a tuple: a batch holds thousands)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None

    @property
    def position(self) -> SourcePosition:
        return SourcePosition(self.topic, self.partition, self.offset, self.timestamp_ms)

    def decode(
        self,
        model: type[R],
        counters: LoopCounters,
        dead_letters: DeadLetterWriter | None,
        max_future_skew_s: float = DEFAULT_MAX_FUTURE_SKEW_S,
        now: float | None = None,
    ) -> R | None:
        """The record, or None when it fails its contract: then dead-lettered (stage
        "validate") or, without a writer, counted as filtered. `now` is the reader's clock
        (this process's by default)."""
        try:
            return decode(model, self.value, max_future_skew_s, now)
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
                self.topic, self.partition, self.offset, stage,
                error.kind if isinstance(error, ContractError) else type(error).__name__,
            )
            return
        dead_letters.write(self.key, self.value, error, self.position, stage)
        counters.dead_lettered += 1


BatchHandler = Callable[[list[Arrival]], Awaitable[None]]


class _BatchRoute(NamedTuple):
    topics: frozenset[str]
    handler: BatchHandler
    idle_s: float


class _Consumer(faust_aiokafka.Consumer):
    """faust's consumer with one fetch loop of its own: records of the app's batch topics go to
    its batch handler whole; any other record (a changelog's, while a table recovers) goes to
    faust's conductor one by one, as faust delivers it, except that the callback is awaited
    directly while the flow is not suspended (faust races it against the suspension in two
    tasks per record)."""

    async def _drain_messages(self, fetcher: Any) -> None:
        route: _BatchRoute | None = getattr(self.app, "batch_route", None)
        last_handled = time.monotonic()
        while not (self._stopped.is_set() or fetcher._stopped.is_set()):
            generation = self.app.consumer_generation_id
            records, active = await self._wait_next_records(min(_FETCH_WAIT_S, _idle(route)))
            if self.should_stop:
                return
            if records and not self.flow_active:
                await self.perform_seek()  # dropped: read again from the committed offsets
                continue
            batch: list[Arrival] = []
            taken: dict[Any, list[int]] = {}
            for tp, fetched in (records or {}).items():
                if self.app.consumer_generation_id != generation:
                    break  # a rebalance began: the new assignment reads these again
                if active is not None and tp not in active and tp not in self._buffered_partitions:
                    continue
                if route is not None and tp.topic in route.topics:
                    offsets = self._fresh(tp, fetched, batch)
                    if offsets:
                        taken[tp] = offsets
                else:
                    await self._deliver(tp, fetched)
            if route is None:
                await asyncio.sleep(0)
                continue
            now = time.monotonic()
            if batch or (now - last_handled >= route.idle_s and self._handles_idle()):
                last_handled = now
                await self._handle(route, batch, taken, generation)
            await asyncio.sleep(0)

    async def seek_to_committed(self) -> Mapping[Any, int]:
        """faust seeks the partitions back to their committed offsets after every recovery and
        whenever it dropped fetched records (a fetch that raced a pause, while its flow was
        stopped); aiokafka leaves a partition with no committed offset where its fetches left
        it, past the records dropped. A batch topic's partition that has none is sought to its
        beginning, where `consumer_auto_offset_reset="earliest"` says it starts."""
        committed: Mapping[Any, int] = await super().seek_to_committed()
        route: _BatchRoute | None = getattr(self.app, "batch_route", None)
        fresh = [tp for tp, offset in committed.items()
                 if not offset and route is not None and tp.topic in route.topics]
        if fresh:
            for tp, start in (await self.earliest_offsets(*fresh)).items():
                await self.seek(tp, start)
        return committed

    def _handles_idle(self) -> bool:
        """Idle ticks advance the service's clock; not while a rebalance or a recovery runs."""
        return self.flow_active and not self.app.rebalancing and not self.app.in_recovery

    def _fresh(self, tp: Any, fetched: list[Any], batch: list[Arrival]) -> list[int]:
        """Appends the records not read before to `batch`; returns their offsets."""
        read = self._read_offset[tp]
        topic, partition = tp.topic, tp.partition
        offsets = []
        for record in fetched:
            offset = record.offset
            if read is None or offset >= read:
                batch.append(Arrival(
                    topic, partition, offset, record.timestamp, record.key, record.value
                ))
                offsets.append(offset)
        return offsets

    async def _handle(
        self, route: _BatchRoute, batch: list[Arrival], taken: dict[Any, list[int]],
        generation: int,
    ) -> None:
        try:
            await route.handler(batch)
        except Exception:
            logger.exception("batch handler failed records=%d; handled again after %.1fs",
                             len(batch), _RETRY_AFTER_S)
            for tp, offsets in taken.items():
                await self.seek(tp, offsets[0])
            await asyncio.sleep(_RETRY_AFTER_S)
            return
        if self.app.consumer_generation_id != generation:
            return  # the partitions moved while it ran: their new owner reads them again
        monitor = self.app.monitor
        now = time.monotonic()
        for tp, offsets in taken.items():
            await self._ack_batch(tp, offsets)
            monitor.stream_inbound_time[tp] = now  # faust's livelock check sees progress
        commit_every = self._commit_every
        if commit_every is not None and self._n_acked >= commit_every:
            self._n_acked = 0
            await self.commit()

    async def _ack_batch(self, tp: Any, offsets: list[int]) -> None:
        """What faust's `ack` does for each of a partition's handled offsets, at once; a hole in
        the offsets (compaction, transaction markers) is a gap faust commits across."""
        read = self._read_offset[tp]
        previous = read
        for offset in offsets:
            if previous is not None and offset - previous > 1:
                await self._add_gap(tp, previous + 1, offset)
            previous = offset
        self._read_offset[tp] = offsets[-1]
        if not self.app.topics.acks_enabled_for(tp.topic):
            return
        with ack_lock:
            committed = self._committed_offset[tp]
            index = self._acked_index[tp]
            fresh = [o for o in offsets if (committed is None or o >= committed) and o not in index]
            index.update(fresh)
            self._acked[tp].extend(fresh)
            self._n_acked += len(fresh)

    async def _deliver(self, tp: Any, fetched: list[Any]) -> None:
        callback = self.callback
        read_offset = self._read_offset
        for n, record in enumerate(fetched, start=1):
            last = read_offset[tp]
            if last is None or record.offset >= last:
                while self.suspend_flow.is_set():
                    await self.can_resume_flow.wait()
                await callback(self._to_message(tp, record))
                read_offset[tp] = record.offset
            if n % _YIELD_EVERY == 0:
                await asyncio.sleep(0)


def _idle(route: _BatchRoute | None) -> float:
    return _FETCH_WAIT_S if route is None else route.idle_s


class _Transport(faust_aiokafka.Transport):
    Consumer = _Consumer


class _Monitor(faust.Monitor):
    """faust's statistics without its per-record bookkeeping (four calls per record of the
    per-record path); the service counts its records itself (`LoopCounters`, its Prometheus
    metrics)."""

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
    """faust creates its data folder (`datadir`, default `<app id>-data` in the working folder)
    even for tables kept in memory; each app gets a temporary one, removed when it stops."""

    batch_route: _BatchRoute | None = None

    def _new_transport(self) -> Any:
        return _Transport(self.conf.broker_consumer, self)

    async def on_stop(self) -> None:
        try:
            await super().on_stop()
        finally:
            shutil.rmtree(self.conf.datadir, ignore_errors=True)


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
    connection: KafkaConnection, app_id: str, commit_interval_s: float = 1.0,
    max_batch: int = 2_000,
) -> faust.App:
    """A faust app logged in as `connection`'s principal; `app_id` is its consumer group; one
    fetch returns at most `max_batch` records."""
    brokers = [f"kafka://{host}" for host in connection.bootstrap_servers.split(",")]
    return _App(
        app_id,
        broker=brokers,
        broker_credentials=_credentials(connection),
        broker_client_id=connection.client_id,
        broker_commit_interval=commit_interval_s,
        broker_max_poll_records=max_batch,
        store="memory://",
        datadir=tempfile.mkdtemp(prefix=f"streamrec-{app_id}-"),
        processing_guarantee="at_least_once",
        topic_allow_declare=False,
        topic_disable_leader=True,
        table_standby_replicas=0,
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        # aiokafka compresses lz4 at level 9 (about 60 MB/s here: a monitor's changelog carries
        # every record it keeps); zstd at its default level is an order of magnitude faster and
        # smaller. Every client of the catalog (librdkafka, aiokafka) reads it.
        producer_compression_type="zstd",
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

    def send(
        self, topic: str, key: str | bytes | None, record: BaseModel,
        on_sent: Callable[[], None] | None = None,
    ) -> None:
        """Queues `record`; `on_sent` runs once the broker has acknowledged it (never for a
        record that was not delivered)."""
        self.send_raw(topic, key, encode(record), on_sent)

    def send_raw(
        self, topic: str, key: str | bytes | None, value: bytes | None,
        on_sent: Callable[[], None] | None = None,
    ) -> None:
        if self.app is None:
            raise RuntimeError("FaustSender used before its app was built")
        target = self._topics.get(topic)
        if target is None:
            target = self._topics[topic] = self.app.topic(
                topic, key_serializer="raw", value_serializer="raw"
            )
        raw_key = key.encode() if isinstance(key, str) else key
        callback = None if on_sent is None else _acknowledged(on_sent)
        target.send_soon(key=raw_key, value=value, callback=callback)


def _acknowledged(on_sent: Callable[[], None]) -> Callable[[Any], None]:
    def callback(_message: Any) -> None:
        on_sent()

    return callback


def consume_batches(
    app: faust.App, topics: Iterable[str], handler: BatchHandler, idle_s: float
) -> None:
    """Subscribes `app` (a `stream_app`) to `topics` and hands their records to `handler`, one
    fetch (at most the app's `max_batch` records) per call, in each partition's order; with no
    records for `idle_s`, `handler` gets an empty batch (so a service's clock moves on), though
    not while a rebalance or a table recovery runs. The handler runs on the app's event loop,
    one batch at a time."""
    if not isinstance(app, _App):
        raise TypeError("consume_batches needs an app made by stream_app")
    names = tuple(topics)
    app.topics.add(app.topic(*names, key_serializer="raw", value_serializer="raw"))
    app.batch_route = _BatchRoute(frozenset(names), handler, idle_s)


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
    build: Callable[[], faust.App],
    stop: threading.Event,
    poll_s: float = 0.2,
    on_restart: Callable[[str], None] | None = None,
) -> None:
    """Builds an app with `build` on a fresh event loop in this thread and runs it until `stop`
    is set, then stops it gracefully (flush, commit, leave the group).

    faust stops an app that crashed (a commit or a send the broker failed while it was away, a
    rebalance callback that raised) and leaves the restart to a supervisor; here the supervisor
    is this loop: the crashed app is stopped and, after a pause (doubling from
    `_RESTART_AFTER_S` up to `_RESTART_AT_MOST_S`, back to the first after an app that ran
    `_HEALTHY_RUN_S`), a new one is built, which resumes from the committed offsets and recovers
    its tables from their changelogs as a new process would. `on_restart` gets the crash's
    reason. While it runs, the garbage collector's young generation is collected every
    `_YOUNG_COLLECTION_EVERY` allocations (see `_rare_young_collections`)."""
    pause = _RESTART_AFTER_S
    with _rare_young_collections():
        while not stop.is_set():
            started = time.monotonic()
            reason = asyncio.run(_run_once(build, stop, poll_s))
            if reason is None:
                return
            if time.monotonic() - started > _HEALTHY_RUN_S:
                pause = _RESTART_AFTER_S
            logger.error("stream app stopped reason=%s; restarting after %.0fs", reason, pause)
            if on_restart is not None:
                on_restart(reason)
            stop.wait(pause)
            pause = min(pause * 2, _RESTART_AT_MOST_S)


async def _run_once(
    build: Callable[[], faust.App], stop: threading.Event, poll_s: float
) -> str | None:
    """Runs one app until `stop` is set (None) or the app stops by itself (why, in words). Each
    app has an event loop of its own (`asyncio.run`), so nothing a crashed app left pending
    outlives it."""
    app = build()
    try:
        await app.start()
        while not app.should_stop:
            if await asyncio.to_thread(stop.wait, poll_s):
                break
    except Exception as error:  # a start the broker refused: as a crash
        logger.warning("stream app failed to start", exc_info=True)
        await app.crash(error)
    finally:
        await _stop(app)
    if stop.is_set():
        return None
    reason = app.crash_reason
    return "stopped" if reason is None else type(reason).__name__


async def _stop(app: faust.App) -> None:
    """Stops `app`; a crashed app's consumer thread is gone, so its last commit can fail or
    wait forever on a producer flush that never ends (faust bounds it by nothing): after
    `_STOP_AT_MOST_S` the stop is abandoned. Its commit can also be cancelled under it, when
    faust's consumer thread (which the crash stops: it leaves the group) stops first. The next
    app reads those records again (at least once), so any of these is logged, not raised."""
    try:
        await asyncio.wait_for(app.stop(), _STOP_AT_MOST_S)
    except TimeoutError:
        logger.warning("stream app did not stop within %.0fs crashed=%s; abandoned",
                       _STOP_AT_MOST_S, app.crashed)
    except asyncio.CancelledError:
        if _cancelled_from_outside():
            raise
        logger.warning("stream app's stop was cancelled under it crashed=%s; abandoned",
                       app.crashed)
    except Exception:
        logger.warning("stream app did not stop cleanly crashed=%s", app.crashed, exc_info=True)


def _cancelled_from_outside() -> bool:
    """Whether the running task itself is being cancelled (not only a future it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


@contextlib.contextmanager
def _rare_young_collections() -> Iterator[None]:
    """An app's process holds a large heap that lives as long as the app (faust, aiokafka, a
    service's tables and open windows), and a batch allocates thousands of short-lived
    containers. At CPython's default threshold (a young collection every 700 allocations) the
    collections that follow rescan the old heap over and over, a third of the monitor's time
    on a backlog; at `_YOUNG_COLLECTION_EVERY` they are rare. The process's thresholds are
    restored when the app stops."""
    previous = gc.get_threshold()
    gc.set_threshold(max(previous[0], _YOUNG_COLLECTION_EVERY), *previous[1:])
    try:
        yield
    finally:
        gc.set_threshold(*previous)
