"""Model versions in the scorer: how one is loaded, and where `model.updates` records go.

A record names a version, never a path: each scorer loads from its own model store and checks
the version's digest first (serving/session_model.py). Before a version serves, the state of
its items (for the ranking stage) and their categories (for filters) are read in one pass, and
the item catalog maps its items, so its first requests wait for nothing. Records of the served
model move the registry (serving, canary, rollbacks) and give the pinned versions their
digests; records of the ranker go to the ranker slot.

Long-lived objects stay out of the cycle collector: what a model or ranker load leaves behind
(torch's lazily imported modules, ~140k tracked objects in `streamrec bench serve`, and the
version's tables, living as long as the process or the version) is frozen as soon as it is
loaded. Left tracked, each full collection walks them: a 50-100 ms stop of every thread every
few seconds under load, the scorer's p99. A replaced version's objects are still freed by
reference counting.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable

from models.store import ModelStore
from schemas.model_updates import ModelUpdate
from serving.features import RedisFeatureReader
from serving.item_catalog import ItemCatalog
from serving.item_state_table import ItemStateTable
from serving.metrics import ServeMetrics
from serving.model_bundle import ModelBundle
from serving.pinned_versions import PinnedVersions
from serving.ranker_slot import RankerSlot
from serving.registry import ModelRegistry
from serving.session_model import load_session_bundle
from serving.settings import ServeSettings
from streams.kafka.contract_loop import Envelope, RecordRejected

logger = logging.getLogger(__name__)

Loader = Callable[[ModelUpdate], ModelBundle]
"""Loads the model version an update names."""


class VersionLoader:
    """Loads a version of the served model and prepares what its requests read."""

    def __init__(
        self,
        settings: ServeSettings,
        reader: RedisFeatureReader,
        item_states: ItemStateTable,
        catalog: ItemCatalog,
    ) -> None:
        self._settings = settings
        self._reader = reader
        self._item_states = item_states
        self._catalog = catalog

    def __call__(self, update: ModelUpdate) -> ModelBundle:
        settings = self._settings
        # Where models live is this scorer's own setting, never the record's.
        bundle = load_session_bundle(
            settings.model_store, update.model_name, update.version, settings.retrieval,
            settings.history_length, published_at=update.published_at,
            cpu_runtime=settings.encoder_cpu_runtime, sha256=update.sha256,
        )
        self._item_states.load(self._reader.load_items, [i for i in bundle.item_ids if i])
        self._catalog.track(bundle.item_index)
        return bundle


def frozen_after(load: Loader) -> Loader:
    """`load`, then what it left behind frozen (the registry loads on a thread of its own)."""

    def frozen(update: ModelUpdate) -> ModelBundle:
        bundle = load(update)
        freeze_long_lived()
        return bundle

    return frozen


def freeze_long_lived() -> None:
    """Takes what a load left behind out of the cycle collector's walks (module docstring).
    The young generations are collected first, so no cyclic garbage of the moment is frozen."""
    gc.collect(1)
    gc.freeze()


def stored_update(settings: ServeSettings, version: str) -> ModelUpdate | None:
    """An update naming a version of the served model as the store holds it (its digest, its
    manifest's time), or the newest stored version's when `version` is empty; None when the
    store has no such version."""
    store = ModelStore(settings.model_store)
    name = settings.model_name
    if not version:
        latest = store.latest(name)
        if latest is None:
            return None
        version = str(latest)
    manifest = settings.model_store / name / version / "manifest.json"
    if not manifest.exists():
        return None
    return ModelUpdate(
        model_name=name, version=version, kind="full", sha256=store.digest(name, version),
        published_at=manifest.stat().st_mtime, note="read from the model store",
    )


class ModelUpdates:
    """The `model.updates` loop's handler."""

    def __init__(
        self,
        settings: ServeSettings,
        registry: ModelRegistry,
        ranker: RankerSlot,
        pinned: PinnedVersions,
        metrics: ServeMetrics,
    ) -> None:
        self._settings = settings
        self._registry = registry
        self._ranker = ranker
        self._pinned = pinned
        self._metrics = metrics

    def handle(self, batch: list[Envelope[ModelUpdate]]) -> list[RecordRejected]:
        for envelope in batch:
            record = envelope.record
            if record.model_name == self._settings.ranker_name:
                if self._ranker.apply(record):
                    freeze_long_lived()
                else:
                    self._metrics.updates_refused.inc()
                continue
            if record.model_name != self._settings.model_name:
                continue
            self._pinned.offer(record)
            if not self._registry.apply(record):
                self._metrics.updates_refused.inc()
        return []

    def bootstrap_from_store(self) -> None:
        """Serve the store's newest version until model.updates says otherwise."""
        update = stored_update(self._settings, "")
        if update is None:
            logger.info("no model in store=%s; serving popularity", self._settings.model_store)
            return
        self._registry.apply(update.model_copy(update={"note": "bootstrap from the model store"}))
