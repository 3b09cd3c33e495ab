"""The scorer process's wiring: four consume loops and two refresh threads around one pipeline.

- requests: `rec.requests` -> serving/pipeline.py (retrieval -> filtering -> ranking ->
  ordering) -> `rec.responses` and `rec.features` (serving/request_handler.py);
- model updates: `model.updates` from the beginning -> the registry (serving, canary), the
  pinned versions of frozen arms and the ranker slot (serving/model_versions.py), read to its
  end and loaded before the first request is consumed;
- KPIs: `kpi.metrics` -> the canary's decisions (serving/canary_decisions.py);
- item metadata: `catalog.items` from the beginning -> the item catalog
  (serving/catalog_follower.py), read to its end before the first request;
- refreshes: the serving configuration every second, item states as Redis reports them
  (serving/refreshes.py).
Every loop flushes its producer before committing, as ContractLoop guarantees (the requests
loop one batch later: serving/request_loop.py).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import torch
from pydantic import BaseModel

from models.store import ModelStore
from schemas.catalog import CatalogItem
from schemas.kpi import KpiReport
from schemas.model_updates import ModelUpdate
from schemas.topics import CATALOG_ITEMS, KPI_METRICS, MODEL_UPDATES, REC_FEATURES, REC_RESPONSES
from serving.canary_decisions import CanaryDecisions
from serving.catalog_follower import CatalogFollower
from serving.feature_reads import FeatureReads
from serving.features import RedisFeatureReader
from serving.item_catalog import ItemCatalog
from serving.item_changes import ItemChanges
from serving.item_state_table import ItemStateTable
from serving.loops import Partitions, control_loop, default_instance, requests_loop, run_loop
from serving.metrics import ServeMetrics
from serving.model_versions import Loader, ModelUpdates, VersionLoader, frozen_after, stored_update
from serving.pinned_versions import PinnedVersions
from serving.pipeline import Scorer
from serving.ranker_slot import RankerSlot
from serving.refreshes import ConfigRefresh, ItemStateRefresh
from serving.registry import ModelRegistry
from serving.request_handler import RequestHandler
from serving.responses import RespondingDeadLetters
from serving.settings import ServeSettings
from streams.kafka.catch_up import read_to_end
from streams.kafka.contract_loop import ContractLoop, Envelope, RecordRejected, TombstoneHandler
from streams.kafka.producer import EventProducer

logger = logging.getLogger(__name__)
R = TypeVar("R", bound=BaseModel)
Handler = Callable[[list[Envelope[R]]], list[RecordRejected]]


class ScorerService:
    def __init__(
        self,
        settings: ServeSettings,
        metrics: ServeMetrics | None = None,
        loader: Loader | None = None,
    ) -> None:
        torch.set_num_threads(settings.torch_threads)
        self.settings = settings
        self.metrics = metrics = metrics or ServeMetrics()
        kafka, redis = settings.kafka, settings.redis
        self.instance = settings.instance_id or default_instance()
        # linger 0: each micro-batch is flushed at once; waiting to fill a batch is latency.
        self.producer = EventProducer(kafka, **{"linger.ms": 0})
        self.control_producer = EventProducer(kafka)
        client = redis.client()
        spin_s = settings.redis_read_spin_us / 1e6
        self.reader = RedisFeatureReader(
            client, redis.key_prefix, settings.history_length, settings.popularity_candidates,
            settings.config_refresh_s, reads=FeatureReads.connect(redis, client, spin_s),
            refresh_inline=False,  # the configuration refresh thread refreshes
        )
        # The item state table's own reads: versions load theirs on the updates thread through
        # redis-py's thread-safe client; the refresh thread re-reads through a lean round trip
        # of its own what Redis reports changed.
        self.item_states = ItemStateTable(settings.item_state_reads_per_s)
        self.catalog = ItemCatalog()
        states = RedisFeatureReader(client, redis.key_prefix,
                                    reads=FeatureReads.connect(redis, client, spin_s))
        load = frozen_after(
            loader or VersionLoader(settings, self.reader, self.item_states, self.catalog)
        )
        self.registry = ModelRegistry(settings.model_name, load, settings.canary.share)
        self.registry.on_rejected = metrics.load_rejected
        self.pinned = PinnedVersions(
            load, lambda version: stored_update(settings, version), self.registry.snapshot
        )
        self.pinned.pin(settings.experiment.pinned)
        self.ranker = RankerSlot(
            ModelStore(settings.model_store), settings.ranker_name, metrics.load_rejected
        )
        self.scorer = Scorer(
            self.reader, self.registry.snapshot, settings.rules, settings.candidates,
            settings.history_length, logged_candidates=settings.logged_candidates,
            ranker=self.ranker.current, item_states=self.item_states.states,
            catalog=self.catalog, new_item_slots=settings.new_item_slots,
            experiment=settings.experiment, pinned=self.pinned.snapshot,
        )
        canary = CanaryDecisions(settings, self.registry, self.control_producer, metrics,
                                 self.ranker)
        self.registry.on_change = canary.routing_changed
        self.updates = ModelUpdates(settings, self.registry, self.ranker, self.pinned, metrics)
        self.catalog_follower = catalog = CatalogFollower(self.catalog, metrics)
        self._partitions = Partitions(self.instance)
        responses = kafka.topic(REC_RESPONSES)
        handler = RequestHandler(self.scorer, self.producer, responses,
                                 kafka.topic(REC_FEATURES), metrics)
        dead_letters = RespondingDeadLetters(self.producer, responses, metrics, self._arm)
        self.requests_loop = requests_loop(settings, metrics, handler.handle, self.producer,
                                           dead_letters, self._partitions.assigned,
                                           self._partitions.revoked)
        self._partitions.settle = self.requests_loop.settle
        self.updates_loop = self._control(MODEL_UPDATES.name, ModelUpdate, self.updates.handle,
                                          self.updates.retire)
        self.kpi_loop = self._control(KPI_METRICS.name, KpiReport, canary.handle)
        self.catalog_loop = self._control(CATALOG_ITEMS.name, CatalogItem, catalog.handle,
                                          catalog.delete)
        self.config_refresh = ConfigRefresh(self.reader, settings.experiment, self.pinned,
                                            metrics, settings.config_refresh_s)
        self._refresh_items = ItemStateRefresh(
            self.item_states, states.item_states, ItemChanges.connect(redis, client),
            settings.item_state_refresh_ms / 1000,
        )
        self._stop_refresh = threading.Event()
        self._threads: list[threading.Thread] = []

    def _control(
        self, topic: str, model: type[R], handler: Handler[R],
        tombstone: TombstoneHandler | None = None,
    ) -> ContractLoop[R]:
        return control_loop(self.settings, self.instance, topic, model, handler,
                            self.control_producer, tombstone)

    def _arm(self, user_id: str) -> tuple[str, str]:
        experiment, arm = self.scorer.arm(user_id)
        return experiment.name, arm.name

    @property
    def partitions(self) -> set[int]:
        """`rec.requests` partitions this scorer owns now."""
        return self._partitions.owned

    def start(self) -> None:
        # torch, faiss and friends leave ~250k long-lived objects behind; every full (gen 2)
        # collection would walk them all: a 100-160 ms stop of every thread, measured as the
        # scorer's p99. Frozen, they are skipped (and each load's: serving/model_versions.py).
        gc.freeze()
        self.metrics.serve(self.settings.metrics_port, self.settings.metrics_host)
        for name, loop in (("scorer-updates", self.updates_loop), ("scorer-kpis", self.kpi_loop),
                           ("scorer-catalog", self.catalog_loop)):
            self._start(name, run_loop, loop)
        self.catalog_follower.catch_up(self.catalog_loop, self.settings.kafka,
                                       self.settings.catalog_catch_up_s)
        self._catch_up_models()
        self.config_refresh.once()  # the first requests see the rules, experiment, popularity
        self._start("scorer-requests", run_loop, self.requests_loop)
        self.metrics.ready.set(1)
        self._start("scorer-item-states", self._refresh_items.run, self._stop_refresh)
        self._start("scorer-config", self.config_refresh.run, self._stop_refresh)
        logger.info("scorer started instance=%s group=%s", self.instance, self.settings.group_id)

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

    def _start(self, name: str, target: Callable[[Any], None], argument: Any) -> None:
        thread = threading.Thread(target=target, args=(argument,), name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def healthy(self) -> bool:
        """Every loop thread still runs (a crashed loop must bring the process down, so that
        its partitions move to a healthy scorer)."""
        return all(t.is_alive() for t in self._threads)

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
        self.pinned.close()
        self.producer.close()
        self.control_producer.close()
        # Frozen objects are never collected, not even at interpreter exit, where native
        # extensions (triton's, which torch imports) then report them as leaks.
        gc.unfreeze()
        counters = self.requests_loop.counters
        logger.info("scorer stopped instance=%s consumed=%d handled=%d dead_lettered=%d",
                    self.instance, counters.consumed, counters.handled, counters.dead_lettered)
