"""Publication: a versioned checkpoint in the model store plus a `model.updates` record.

A delta carries only the rows that differ from the serving version (plus the small dense
weights); when most rows changed — as a full softmax makes them — a full checkpoint is cheaper
to load and is published instead. Rollback is one record: the version's own, restated as
`rolled_back` (`roll_back`); scorers then serve the newest earlier serving version
(schemas/model_log.py). `retire` deletes the keys of versions past the fallbacks the log keeps,
so the compacted topic stays bounded.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Literal

import torch

from models.session_checkpoint import changed_rows, delta_parts, row_count
from models.store import Manifest, ModelStore
from schemas import ModelUpdate, TrainingWindow
from schemas.model_log import ModelLog
from schemas.model_updates import update_key
from schemas.topics import MODEL_UPDATES
from streams.kafka.connection import KafkaConnection
from streams.kafka.producer import EventProducer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Publication:
    version: str
    kind: str
    location: str
    changed_rows: int
    published_at: float
    update: ModelUpdate
    """The record announcing it."""
    announced_at: float = 0.0
    """When the record was flushed to Kafka: from then on a scorer can load the version."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Where the publication's time went: `store` (rows compared, files written), `digest`,
    `announce` (the record sent and flushed)."""


class Publisher:
    def __init__(
        self,
        store: ModelStore,
        producer: EventProducer,
        kafka: KafkaConnection,
        model_name: str,
        full_share: float,
        stage: Literal["serving", "candidate"] = "serving",
    ) -> None:
        self.store = store
        self.producer = producer
        self.topic = kafka.topic(MODEL_UPDATES)
        self.model_name = model_name
        self.full_share = full_share
        self.stage: Literal["serving", "candidate"] = stage

    def publish(
        self,
        version: str,
        tensors: dict[str, torch.Tensor],
        parent: tuple[str, dict[str, torch.Tensor]] | None,
        manifest: Manifest,
        window: TrainingWindow | None,
    ) -> Publication:
        started = time.perf_counter()
        changed = changed_rows(tensors, parent[1]) if parent else None
        total_rows = row_count(tensors)
        n_changed = len(changed) if changed is not None else total_rows
        if parent is None or changed is None or n_changed > self.full_share * total_rows:
            path = self.store.save_full(self.model_name, tensors, manifest)
            kind = "full"
        else:
            rows, dense = delta_parts(tensors, changed)
            path = self.store.save_delta(self.model_name, parent[0], rows, dense, manifest)
            kind = "delta"
        stored = time.perf_counter()
        sha256 = self.store.digest(self.model_name, version)
        digested = time.perf_counter()
        published_at = time.time()
        update = ModelUpdate(
            model_name=self.model_name,
            version=version,
            kind="delta" if kind == "delta" else "full",
            base_version=parent[0] if kind == "delta" and parent else None,
            stage=self.stage,
            sha256=sha256,
            metrics={k: float(v) for k, v in manifest.metrics.items()},
            window=window,
            published_at=published_at,
        )
        self.producer.send(self.topic, update.log_key, update)
        self.producer.flush()
        announced = time.perf_counter()
        seconds = {
            "store": stored - started, "digest": digested - stored, "announce": announced - digested
        }
        logger.info(
            "published model=%s version=%s kind=%s rows=%d store_s=%.3f digest_s=%.3f "
            "announce_s=%.3f", self.model_name, version, kind, n_changed, *seconds.values(),
        )
        return Publication(version, kind, str(path), n_changed, published_at, update,
                           published_at + announced - digested, seconds)

    def roll_back(self, announced: ModelUpdate, note: str) -> ModelUpdate:
        """Takes a version out of service for good, on every scorer: its own record, restated
        as `rolled_back` (scorers fall back to the newest earlier serving version)."""
        update = announced.model_copy(
            update={"stage": "rolled_back", "note": f"rollback: {note}"[:2048]}
        )
        self.producer.send(self.topic, update.log_key, update)
        self.producer.flush()
        logger.warning("rolled back model=%s version=%s", update.model_name, update.version)
        return update

    def retire(self, log: ModelLog, model_name: str) -> list[str]:
        """Tombstones for the versions no serving state can reach again (`log.retirable`)."""
        retired = log.retirable(model_name)
        for version in retired:
            self.producer.send_raw(self.topic, update_key(model_name, version), None)
            log.retire(model_name, version)
        if retired:
            self.producer.flush()
            logger.info("retired model=%s versions=%s", model_name, ",".join(retired))
        return retired
