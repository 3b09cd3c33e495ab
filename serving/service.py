"""Kafka wiring of the scorer: four ContractLoops sharing one process.

- requests: `rec.requests` (the scorers' shared consumer group) -> Scorer -> `rec.responses`;
  rejects are dead-lettered to `rec.requests.dlq` and, when the requester can be identified,
  answered with an error response;
- model updates: `model.updates` from the beginning (a private group per process start, so the
  compacted log rebuilds the desired versions) -> ModelRegistry (background loads, atomic swap),
  read to its end and loaded before the first request is consumed;
- KPIs: `kpi.metrics` (private group) -> CanaryJudge -> promotion / rollback, applied locally and
  published on `model.updates` so that every scorer and operator follows;
- item metadata: `catalog.items` from the beginning (private group, compacted log) ->
  ItemCatalog, the content features' source; a tombstone deletes an item's record.
Control records that fail their contract, or whose handling raises, are dead-lettered to
`<topic>.dlq` one by one; the loops go on.
Every loop flushes its producer before committing, as ContractLoop guarantees (the requests
loop one batch later: serving/request_loop.py).
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import torch
from confluent_kafka import Consumer, KafkaException, TopicPartition
from pydantic import BaseModel
from redis import RedisCluster

from models.store import ModelStore
from schemas.catalog import CatalogItem, item_key
from schemas.kpi import KpiReport
from schemas.model_updates import ModelUpdate, parse_update_key
from schemas.recommendations import RecommendationRequest
from schemas.topics import (
    CATALOG_ITEMS,
    KPI_METRICS,
    MODEL_UPDATES,
    REC_FEATURES,
    REC_REQUESTS,
    REC_RESPONSES,
)
from schemas.wire import ContractError
from serving.canary import CanaryJudge, decision_update
from serving.cluster_read_pipeline import ClusterReadPipeline
from serving.features import RedisFeatureReader
from serving.item_catalog import ItemCatalog
from serving.item_changes import Address, ItemChanges
from serving.item_state_table import ItemStateTable
from serving.metrics import ServeMetrics
from serving.model_bundle import ModelBundle
from serving.ranker_slot import RankerSlot
from serving.read_pipeline import ReadPipeline
from serving.registry import ModelRegistry, Routing
from serving.request_loop import AsyncCommitConsumer, RequestLoop
from serving.responses import error_response, rejection_answer
from serving.scorer import Answer, Scorer
from serving.session_model import load_session_bundle
from serving.settings import ServeSettings
from streams.features.keys import FeatureKeys
from streams.kafka.admin import end_offsets
from streams.kafka.catch_up import read_to_end
from streams.kafka.consumer import BatchConsumer
from streams.kafka.contract_loop import (
    ContractLoop,
    Envelope,
    RecordRejected,
    Tombstone,
    TombstoneHandler,
)
from streams.kafka.deadletter import DeadLetterWriter, SourcePosition, Stage
from streams.kafka.producer import EventProducer
from streams.redis.connection import SyncClient

logger = logging.getLogger(__name__)

Loader = Callable[[ModelUpdate], ModelBundle]
"""Loads the model version an update names."""

SERVICE = "scorer"
R = TypeVar("R", bound=BaseModel)


class RespondingDeadLetters(DeadLetterWriter):
    """Dead letters for `rec.requests`; an identifiable bad request also gets an error answer."""

    def __init__(
        self, producer: EventProducer, responses_topic: str, metrics: ServeMetrics
    ) -> None:
        super().__init__(producer, SERVICE)
        self._responses_topic = responses_topic
        self._metrics = metrics

    def write(
        self,
        key: bytes | None,
        value: bytes | None,
        error: BaseException,
        source: SourcePosition,
        stage: Stage = "validate",
    ) -> None:
        if stage == "validate":
            self._metrics.requests.labels(outcome="invalid").inc()
            error = self._answer(value, error, source)
        super().write(key, value, error, source, stage)

    def _answer(
        self, value: bytes | None, error: BaseException, source: SourcePosition
    ) -> BaseException:
        """Sends the error response when the requester can be identified. Never raises: if even
        the error response cannot be built or sent, the dead letter says so instead."""
        try:
            response = rejection_answer(value, error, time.time())
            if response is not None:
                self._producer.send(self._responses_topic, response.user_id, response)
            return error
        except Exception as failure:
            logger.error(
                "no error response topic=%s partition=%d offset=%d error=%s",
                source.topic, source.partition, source.offset, type(failure).__name__,
            )
            kind = error.kind if isinstance(error, ContractError) else type(error).__name__
            return ContractError(
                kind, f"{error} (no error response: {type(failure).__name__})"
            )


def default_instance() -> str:
    return f"{socket.gethostname()[:40]}-{os.getpid()}"


class ScorerService:
    def __init__(
        self,
        settings: ServeSettings,
        metrics: ServeMetrics | None = None,
        loader: Loader | None = None,
    ) -> None:
        torch.set_num_threads(settings.torch_threads)
        self.settings = settings
        self.metrics = metrics or ServeMetrics()
        kafka = settings.kafka
        self.instance = settings.instance_id or default_instance()
        # linger 0: each micro-batch is flushed at once; waiting to fill a batch is latency.
        self.producer = EventProducer(kafka, **{"linger.ms": 0})
        self.control_producer = EventProducer(kafka)
        self._responses_topic = kafka.topic(REC_RESPONSES)
        redis_client = settings.redis.client()
        self._features_topic = kafka.topic(REC_FEATURES)
        self.reader = RedisFeatureReader(
            redis_client,
            settings.redis.key_prefix,
            history_length=settings.history_length,
            popularity_size=settings.popularity_candidates,
            refresh_s=settings.config_refresh_s,
            reads=self._read_pipeline(settings, redis_client),
            refresh_inline=False,  # the scorer-config thread refreshes (_refresh_config)
        )
        # The item state table's readers: the scorer's reader loads a version's items on the
        # updates thread (through redis-py's thread-safe client); a lean pipeline of its own
        # serves the refresh thread, which learns what changed from Redis's invalidation
        # messages.
        prefix = settings.redis.key_prefix
        self._refresh_item_states_from = RedisFeatureReader(
            redis_client, prefix, reads=self._read_pipeline(settings, redis_client)
        ).item_states
        self._item_changes = ItemChanges(
            self._masters(settings, redis_client), FeatureKeys(prefix),
            settings.redis.username, settings.redis.resolved_password(),
            settings.redis.socket_timeout_s,
        )
        self.item_states = ItemStateTable(settings.item_state_reads_per_s)
        self.catalog = ItemCatalog()
        self._stop_refresh = threading.Event()
        self.registry = ModelRegistry(
            settings.model_name, _frozen_after(loader or self._load), settings.canary.share
        )
        self.registry.on_rejected = self.metrics.load_rejected
        self.judge = CanaryJudge(settings.canary)
        self._judge_lock = threading.Lock()
        self.registry.on_change = self._routing_changed
        self.ranker = RankerSlot(
            ModelStore(settings.model_store), settings.ranker_name, self.metrics.load_rejected
        )
        self.scorer = Scorer(
            self.reader,
            self.registry.snapshot,
            settings.rules,
            candidates=settings.candidates,
            history_length=settings.history_length,
            logged_candidates=settings.logged_candidates,
            ranker=self.ranker.current,
            item_states=self.item_states.states,
            catalog=self.catalog,
            new_item_slots=settings.new_item_slots,
        )
        self.partitions: set[int] = set()
        """`rec.requests` partitions this scorer owns now."""
        self.requests_loop = self._requests_loop()
        self.updates_loop = self._control_loop(
            MODEL_UPDATES.name, ModelUpdate, self._on_updates, self._on_updates_tombstone
        )
        self.kpi_loop = self._control_loop(KPI_METRICS.name, KpiReport, self._on_kpis)
        self.catalog_loop = self._control_loop(
            CATALOG_ITEMS.name, CatalogItem, self._on_catalog, self._on_catalog_tombstone
        )
        self._threads: list[threading.Thread] = []

    # -- wiring -------------------------------------------------------------------------------

    @staticmethod
    def _masters(settings: ServeSettings, client: SyncClient) -> Callable[[], list[Address]]:
        """The Redis masters now: the cluster's (its slot map) or the one Redis."""
        if isinstance(client, RedisCluster):
            cluster = client
            return lambda: [
                (node.host, node.port)
                for node in cluster.get_primaries()  # type: ignore[no-untyped-call]
            ]
        address = (settings.redis.host, settings.redis.port)
        return lambda: [address]

    @staticmethod
    def _read_pipeline(
        settings: ServeSettings, client: SyncClient
    ) -> ReadPipeline | ClusterReadPipeline:
        """The per-batch round trip, lean on one Redis and on a cluster (one per master)."""
        connection = settings.redis
        spin_s = settings.redis_read_spin_us / 1e6
        login = (connection.username, connection.resolved_password())
        timeout_s = connection.socket_timeout_s
        if isinstance(client, RedisCluster):
            return ClusterReadPipeline(client, *login, timeout_s, spin_s)
        return ReadPipeline(connection.host, connection.port, *login, timeout_s, spin_s)

    def _requests_loop(self) -> RequestLoop:
        kafka = self.settings.kafka
        # Long polling: the broker answers a parked fetch as soon as a request is appended
        # (fetch.min.bytes 1), so the wait bound adds no latency; a short one (it was 2 ms) only
        # made an idle scorer send ~500 empty fetches/s, broker CPU taken from everyone.
        fetch: dict[str, Any] = {"fetch.wait.max.ms": 100, "fetch.min.bytes": 1}
        consumer = AsyncCommitConsumer(
            kafka, self.settings.group_id, [kafka.topic(REC_REQUESTS)],
            auto_offset_reset=self.settings.requests_offset_reset, overrides=fetch,
            on_assign=self._assigned, on_revoke=self._revoked,
        )
        dead_letters = RespondingDeadLetters(self.producer, self._responses_topic, self.metrics)
        return RequestLoop(
            self.metrics,
            consumer,
            self._handle,
            self.producer,
            dead_letters,
            batch_size=self.settings.batch_size,
            fill_s=self.settings.batch_fill_ms / 1000,
            commit_interval_s=self.settings.commit_interval_ms / 1000,
            fill_min_expected=self.settings.batch_fill_min_expected,
            max_future_skew_s=self.settings.max_future_skew_s,
        )

    def _control_loop(
        self,
        topic: str,
        model: type[R],
        handler: Callable[[list[Envelope[R]]], list[RecordRejected]],
        on_tombstone: TombstoneHandler | None = None,
    ) -> ContractLoop[R]:
        kafka = self.settings.kafka
        # A fresh group per start: the whole log is read again (the desired state rebuilds).
        group = f"{self.settings.group_id}.{topic}.{self.instance}.{uuid.uuid4().hex[:8]}"
        consumer = BatchConsumer(kafka, group, [kafka.topic(topic)], auto_offset_reset="earliest")
        return ContractLoop(
            consumer,
            model,
            handler,
            self.control_producer,
            DeadLetterWriter(self.control_producer, SERVICE),
            batch_size=100,
            batch_timeout_s=0.2,
            max_future_skew_s=self.settings.max_future_skew_s,
            isolate_records=True,
            on_tombstone=on_tombstone,
        )

    # Tracked from the rebalance callbacks (they run on the loop's thread): querying the consumer
    # from another thread would contend with its polling.
    def _assigned(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.partitions |= {p.partition for p in partitions}
        logger.info("partitions assigned instance=%s partitions=%s", self.instance,
                    sorted(p.partition for p in partitions))

    def _revoked(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Answered requests of the partitions leaving are committed while they are still ours.
        self.requests_loop.settle()
        self.partitions -= {p.partition for p in partitions}

    def _load(self, update: ModelUpdate) -> ModelBundle:
        # The record names a version and vouches for its bytes; where models live is this
        # scorer's own setting, never the record's.
        bundle = load_session_bundle(
            self.settings.model_store,
            update.model_name,
            update.version,
            update.sha256,
            self.settings.retrieval,
            self.settings.history_length,
            published_at=update.published_at,
            cpu_runtime=self.settings.encoder_cpu_runtime,
        )
        # Categories and item states of the whole catalog up front, in one read, so filters
        # never wait on a cold cache and the ranking stage describes every candidate from its
        # first request.
        self.item_states.load(self.reader.load_items, [i for i in bundle.item_ids if i])
        self.catalog.track(bundle.item_index)
        return bundle

    def _refresh_config(self) -> None:
        """Unavailable items, rules and popularity every `config_refresh_s`, off the request
        thread; while Redis is away the last ones read keep serving."""
        while not self._stop_refresh.wait(self.settings.config_refresh_s):
            self._refresh_config_once()

    def _refresh_config_once(self) -> None:
        try:
            self.reader.refresh()
        except Exception as error:
            logger.warning("serving configuration not refreshed error=%s", type(error).__name__)

    def _refresh_item_states(self) -> None:
        try:
            self.item_states.follow(
                self._refresh_item_states_from, self._item_changes.changed, self._stop_refresh,
                self.settings.item_state_refresh_ms / 1000,
            )
        except Exception:
            logger.exception("item state refresh crashed")
            raise
        finally:
            self._item_changes.close()

    # -- handlers -----------------------------------------------------------------------------

    def _handle(self, batch: list[Envelope[RecommendationRequest]]) -> list[RecordRejected]:
        try:
            answers: list[Answer | BaseException] = list(
                self.scorer.score_batch([e.record for e in batch])
            )
        except Exception:
            logger.exception("batch scoring failed size=%d; retrying one by one", len(batch))
            answers = [self._score_one(e) for e in batch]
        rejected = []
        for envelope, answer in zip(batch, answers, strict=True):
            request = envelope.record
            if isinstance(answer, BaseException):
                response = error_response(
                    request.request_id, request.user_id, "internal", answer, time.time()
                )
                self.producer.send(self._responses_topic, request.user_id, response)
                self.metrics.requests.labels(outcome="internal_error").inc()
                rejected.append(RecordRejected(envelope, answer))  # type: ignore[arg-type]
                continue
            self.producer.send(self._responses_topic, request.user_id, answer.response)
            if answer.features is not None:
                # After the response: labels come from what happens once the answer is out.
                self.producer.send(self._features_topic, request.user_id, answer.features)
            self.metrics.requests.labels(outcome=answer.outcome).inc()
            self.metrics.new_items.inc(answer.new_items)
        return rejected

    def _score_one(self, envelope: Envelope[RecommendationRequest]) -> Answer | BaseException:
        try:
            return self.scorer.score_batch([envelope.record])[0]
        except Exception as error:
            logger.error(
                "scoring failed request_id=%s error=%s",
                envelope.record.request_id, type(error).__name__,
            )
            return error

    def _on_updates(self, batch: list[Envelope[ModelUpdate]]) -> list[RecordRejected]:
        rejected = []
        for envelope in batch:
            record = envelope.record
            try:
                named = parse_update_key(envelope.key)
            except ContractError as error:
                named, reason = None, error
            else:
                reason = ContractError("SchemaViolation", "the key names another version")
            if named != (record.model_name, record.version):
                # Compaction keeps a version's newest record by key: a record under another
                # version's key would displace that version's for scorers started later.
                self.metrics.updates_refused.inc()
                rejected.append(RecordRejected(envelope, reason))  # type: ignore[arg-type]
            elif record.model_name == self.settings.ranker_name:
                if self.ranker.apply(record):
                    _freeze_long_lived()
            elif record.model_name == self.settings.model_name:
                self.registry.apply(record)
        return rejected

    def _on_updates_tombstone(self, tombstone: Tombstone) -> None:
        model_name, version = parse_update_key(tombstone.key)
        if model_name == self.settings.ranker_name:
            self.ranker.retire(version)
        elif model_name == self.settings.model_name:
            self.registry.retire(version)

    def _on_kpis(self, batch: list[Envelope[KpiReport]]) -> list[RecordRejected]:
        for envelope in batch:
            with self._judge_lock:
                decision = self.judge.record(envelope.record)
            routing = self.registry.snapshot()
            if decision is None or routing.canary is None:
                continue
            if routing.canary.version != decision.candidate:
                continue
            update = decision_update(decision, routing.canary.update, self.settings.canary.kpi)
            self.metrics.canary_decisions.labels(action=decision.action).inc()
            self.registry.apply(update)
            self.control_producer.send(
                self.settings.kafka.topic(MODEL_UPDATES), update.log_key, update
            )
        return []

    def _on_catalog(self, batch: list[Envelope[CatalogItem]]) -> list[RecordRejected]:
        self.catalog.apply(e.record for e in batch)
        self.metrics.catalog_items.set(len(self.catalog))
        return []

    def _on_catalog_tombstone(self, tombstone: Tombstone) -> None:
        self.catalog.delete(item_key(tombstone.key))
        self.metrics.catalog_items.set(len(self.catalog))

    def _routing_changed(self, routing: Routing) -> None:
        self.metrics.routing_changed(routing)
        serving = routing.serving.version if routing.serving else None
        canary = routing.canary
        with self._judge_lock:
            self.judge.watch(serving, canary.version if canary else None,
                             canary.since if canary else 0.0)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        # torch, faiss and friends leave ~250k long-lived objects behind; every full (gen 2)
        # collection would walk them all: a 100-160 ms stop of every thread, measured as the
        # scorer's p99. Frozen, they are skipped (and each load's, see _freeze_long_lived).
        gc.freeze()
        self.metrics.serve(self.settings.metrics_port)
        for name, loop in (
            ("scorer-updates", self.updates_loop),
            ("scorer-kpis", self.kpi_loop),
            ("scorer-catalog", self.catalog_loop),
        ):
            self._start_loop(name, loop)
        self._catch_up_catalog()
        self._catch_up_models()
        self._refresh_config_once()  # the first requests see the rules and popularity
        self._start_loop("scorer-requests", self.requests_loop)
        self.metrics.ready.set(1)
        for name, target in (
            ("scorer-item-states", self._refresh_item_states),
            ("scorer-config", self._refresh_config),
        ):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        logger.info("scorer started instance=%s group=%s", self.instance, self.settings.group_id)

    def _start_loop(self, name: str, loop: ContractLoop[Any]) -> None:
        thread = threading.Thread(target=self._run, args=(loop,), name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _catch_up_catalog(self) -> None:
        """Reads catalog.items to its end before the first request, as a global table is
        restored before processing starts: until then the items' content is unknown, and the
        read would take the CPU from the first requests."""
        topic = self.settings.kafka.topic(CATALOG_ITEMS)
        started = time.monotonic()
        try:
            ends = end_offsets(self.settings.kafka, topic)
        except KafkaException as error:
            logger.warning("catalog end unknown error=%s", error)
            return
        finished = self.catalog_loop.finished
        while any(finished.get((topic, p), 0) < end for p, end in ends.items()):
            if time.monotonic() - started > self.settings.catalog_catch_up_s:
                logger.warning("catalog not caught up waited_s=%.1f items=%d",
                               time.monotonic() - started, len(self.catalog))
                return
            time.sleep(0.05)
        logger.info("catalog caught up items=%d seconds=%.2f", len(self.catalog),
                    time.monotonic() - started)

    def _catch_up_models(self) -> None:
        """Reads model.updates to its end and loads what it names before the first request: a
        scorer that answered earlier could answer with a version the log has rolled back."""
        started = time.monotonic()
        timeout_s = self.settings.model_catch_up_s
        topic = self.settings.kafka.topic(MODEL_UPDATES)
        if read_to_end(self.updates_loop, self.settings.kafka, topic, timeout_s):
            left = max(0.0, timeout_s - (time.monotonic() - started))
            if not self.registry.wait_until_settled(left):
                logger.warning("models not loaded before serving waited_s=%.1f", timeout_s)

    def healthy(self) -> bool:
        """Every loop thread still runs (a crashed loop must bring the process down, so that
        its partitions move to a healthy scorer)."""
        return all(t.is_alive() for t in self._threads)

    def _run(self, loop: ContractLoop[Any]) -> None:
        try:
            loop.run()
        except Exception:
            logger.exception("loop crashed thread=%s", threading.current_thread().name)
            raise

    def stop(self) -> None:
        loops = (self.requests_loop, self.updates_loop, self.kpi_loop, self.catalog_loop)
        for loop in loops:
            loop.stop()
        self._stop_refresh.set()
        for thread in self._threads:
            thread.join(timeout=30)
        for loop in loops:
            loop.consumer.close()
        self.registry.close()
        self.producer.close()
        self.control_producer.close()
        # Frozen objects are never collected, not even at interpreter exit, where native
        # extensions (triton's, which torch imports) then report them as leaks.
        gc.unfreeze()
        logger.info(
            "scorer stopped instance=%s consumed=%d handled=%d dead_lettered=%d",
            self.instance, self.requests_loop.counters.consumed,
            self.requests_loop.counters.handled, self.requests_loop.counters.dead_lettered,
        )


def _frozen_after(load: Loader) -> Loader:
    """`load`, then what it left behind frozen (the registry loads on a thread of its own)."""

    def frozen(update: ModelUpdate) -> ModelBundle:
        bundle = load(update)
        _freeze_long_lived()
        return bundle

    return frozen


def _freeze_long_lived() -> None:
    """Takes what a model or ranker load left behind out of the cycle collector's walks.

    A first load imports torch's lazily loaded modules (~140k tracked objects in `streamrec
    bench serve`) and each builds its version's tables, all living as long as the process or
    the version. Left tracked, each full collection walks them: a 50-100 ms stop of every
    thread every few seconds under load, the scorer's p99. Frozen, they cost nothing; a
    replaced version's objects are still freed by reference counting. The young generations
    are collected first, so no cyclic garbage of the moment is frozen with them."""
    gc.collect(1)
    gc.freeze()
