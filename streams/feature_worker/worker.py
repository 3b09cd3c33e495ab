"""The feature worker: a faust app whose one agent turns `interactions` into Redis features.

Run with `streamrec stream`; every setting comes from STREAMREC_* variables
(streams/feature_worker/settings.py). Workers sharing `group_id` split the partitions.

Acknowledgement: faust acks the events of a `take_events` batch when the loop body returns, and
commits acked offsets periodically and on rebalance or stop. The body returns only after the
batch is applied and its dead letters are flushed, so a commit never covers unapplied events.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from typing import Any

import faust

from schemas.topics import INTERACTIONS
from streams.feature_worker.fetch_batching import BatchingApp, FetchBatching
from streams.feature_worker.metrics import StreamMetrics
from streams.feature_worker.pipeline import Backoff, FeaturePipeline, SourceRecord
from streams.feature_worker.settings import StreamSettings
from streams.feature_worker.writer import FeatureWriter
from streams.kafka.deadletter import DeadLetterWriter
from streams.kafka.producer import EventProducer

logger = logging.getLogger(__name__)

EXIT_ABANDONED_BATCH = 75
"""Exit status when the worker stops holding a batch it could not apply (it will be re-read)."""

_STOP_GRACE_S = 5.0


def _broker_urls(settings: StreamSettings) -> list[str]:
    return [f"kafka://{server.strip()}" for server in settings.kafka.bootstrap_servers.split(",")]


def broker_credentials(settings: StreamSettings) -> Any:
    """faust's form of the connection's security: the same protocol librdkafka clients use, so
    `SSL` is TLS here too and SASL without a principal or password fails at start."""
    kafka = settings.kafka
    ssl_context = None
    if kafka.uses_tls:
        import ssl

        ssl_context = ssl.create_default_context(cafile=kafka.ssl_ca_location)
    if not kafka.uses_sasl:
        return faust.SSLCredentials(ssl_context) if ssl_context is not None else None
    username, password = kafka.credentials()
    return faust.SASLCredentials(
        username=username,
        password=password,
        mechanism=kafka.sasl_mechanism,
        ssl_context=ssl_context,
    )


def create_app(settings: StreamSettings) -> BatchingApp:
    settings.datadir.mkdir(parents=True, exist_ok=True)
    return BatchingApp(
        settings.group_id,
        fetch_batching=FetchBatching(settings.fetch_min_bytes, settings.fetch_max_wait_ms),
        broker=_broker_urls(settings),
        broker_credentials=broker_credentials(settings),
        value_serializer="raw",
        key_serializer="raw",
        # The catalog creates and owns the topics; a worker declares nothing.
        topic_allow_declare=False,
        topic_disable_leader=True,
        web_enabled=False,
        datadir=str(settings.datadir / settings.group_id),
        consumer_auto_offset_reset="earliest",
        consumer_group_instance_id=settings.instance_id,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=min(3.0, settings.session_timeout_s / 3),
        broker_request_timeout=max(90.0, settings.session_timeout_s + 5),
        broker_commit_interval=1.0,
        # Bounded in-memory buffering: the fetcher pauses when the stream buffer is full.
        stream_buffer_maxsize=max(4096, 2 * settings.batch_max_events),
    )


def _records(events: Sequence[Any]) -> list[SourceRecord]:
    records = []
    for event in events:
        m = event.message
        records.append(
            SourceRecord(
                topic=m.topic,
                partition=m.partition,
                offset=m.offset,
                key=m.key,
                value=m.value,
                timestamp_ms=int(m.timestamp * 1000) if m.timestamp else None,
            )
        )
    return records


def _observe_lag(app: faust.App, metrics: StreamMetrics, events: Sequence[Any]) -> None:
    last: dict[Any, int] = {}
    for event in events:
        last[event.message.tp] = event.message.offset
    for tp, offset in last.items():
        try:
            highwater = app.consumer.highwater(tp)
        except Exception:  # the consumer may be mid-rebalance; the next batch will report
            continue
        if highwater is not None:
            metrics.consumer_lag.labels(str(tp.partition)).set(max(0, highwater - offset - 1))


def attach_agent(app: faust.App, settings: StreamSettings, metrics: StreamMetrics) -> None:
    topic = app.topic(
        settings.kafka.topic(INTERACTIONS),
        value_serializer="raw",
        key_serializer="raw",
        allow_empty=True,  # a null value is a record too: it goes to the dead-letter topic
    )
    producer = EventProducer(settings.kafka)
    dead_letters = DeadLetterWriter(producer, settings.service_name)
    backoff = Backoff(settings.retry_initial_s, settings.retry_max_s)

    @app.on_partitions_assigned.connect
    async def _assigned(sender: Any, /, *args: Any, signal: Any, **_: Any) -> None:
        # faust sends the new assignment (a set of TPs) as the first positional argument.
        metrics.assigned_partitions.set(len(args[0]) if args else 0)

    @app.agent(topic, concurrency=1)
    async def features(stream: Any) -> None:
        writer = FeatureWriter(
            FeatureWriter.connect(settings.redis), settings.redis.key_prefix, settings.key_ttls()
        )
        pipeline = FeaturePipeline(
            writer, dead_letters, producer, metrics, backoff, settings.script_chunk_events,
            max_future_skew_s=settings.max_future_skew_s,
        )
        async for events in stream.take_events(settings.batch_max_events, settings.batch_within_s):
            await _process_or_abandon(pipeline, events)
            _observe_lag(app, metrics, events)


async def _process_or_abandon(pipeline: FeaturePipeline, events: Sequence[Any]) -> None:
    """Processes a batch; a batch that cannot be finished is abandoned without any commit.

    take_events acks a batch on the way out whether or not it was applied, and faust commits
    acked offsets when it stops. So on stop the batch gets a short grace period to finish; if it
    cannot (Redis down) or processing failed, the process exits at once, without a commit, and
    the batch is re-read (idempotently) by whoever owns the partitions next.
    """
    task = asyncio.ensure_future(pipeline.process(_records(events)))
    try:
        await asyncio.shield(task)
        return
    except asyncio.CancelledError:
        try:
            await asyncio.wait_for(task, timeout=_STOP_GRACE_S)
        except BaseException:
            _abandon("stopped", len(events))
        raise
    except BaseException:
        logger.exception("batch processing failed events=%d", len(events))
        _abandon("failed", len(events))


def _abandon(kind: str, events: int) -> None:
    logger.critical(
        "worker %s holding an unapplied batch events=%d; exiting without commit", kind, events
    )
    logging.shutdown()
    os._exit(EXIT_ABANDONED_BATCH)


def _warn_about_missing_codecs() -> None:
    from aiokafka.codec import has_lz4

    if not has_lz4():
        # EventProducer compresses with lz4; aiokafka needs the `lz4` package to read that, and
        # without it the fetcher fails on the first such batch (the worker stops; nothing is
        # committed past it, so no event is lost, but none is applied either).
        logger.error("lz4 codec unavailable: install `lz4` to read lz4-compressed interactions")


def main() -> None:
    settings = StreamSettings()
    settings.apply_cpu_nice()
    _warn_about_missing_codecs()
    level = os.environ.get("STREAMREC_LOG_LEVEL", "INFO").lower()
    metrics = StreamMetrics()
    metrics.serve(settings.metrics_port)
    app = create_app(settings)
    attach_agent(app, settings, metrics)
    logger.info(
        "starting feature worker group=%s topic=%s key_prefix=%s",
        settings.group_id,
        settings.kafka.topic(INTERACTIONS),
        settings.redis.key_prefix,
    )
    faust.Worker(app, loglevel=level, quiet=True).execute_from_commandline()


if __name__ == "__main__":
    main()
