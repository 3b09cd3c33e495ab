"""The versions a live replay serves, made by the online trainer's own code.

Version 1.0 is pre-trained and published as the demo's bootstrap does (a full retrain on the
pre-training part, checkpointed, restored by the trainer, published as a major version); it is
the `frozen` arm's version for the whole replay. The trainer then consumes the replay's
micro-batches (`OnlineTrainer.train_batch`: prequential scores, gate, learning steps, the gated
publication cadence on the replay's clock), and every version it publishes is loaded with the
scorer's own loader (`load_session_bundle`: encoder, faiss index of the scorer's retrieval
settings) and serves from `load_s` after its publication (the `model` arm). Only the transport
differs: no Kafka record, the store is a temporary folder, no recovery checkpoints.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from bench.live_offline.timeline import Timeline
from models.session_checkpoint import row_count
from models.session_config import SessionTransformerConfig
from models.store import Manifest, ModelStore
from online_trainer.checkpoint import CheckpointStore, TrainerState
from online_trainer.gate import GateDecision
from online_trainer.online_model import Interaction, OnlineModel
from online_trainer.publisher import Publication, Publisher
from online_trainer.retrain import full_retrain
from online_trainer.settings import TrainSettings
from online_trainer.trainer import OnlineTrainer
from schemas import EventType, InteractionEvent, ModelUpdate, TrainingWindow
from schemas.model_log import ModelLog
from serving.model_bundle import ModelBundle
from serving.session_model import load_session_bundle
from serving.settings import ServeSettings
from streams.kafka.contract_loop import Envelope
from streams.kafka.deadletter import SourcePosition

logger = logging.getLogger(__name__)


class StorePublisher(Publisher):
    """Publications into the model store only: the replay reads the store itself."""

    def __init__(self, store: ModelStore, model_name: str, clock: Callable[[], float]) -> None:
        self.store = store
        self.model_name = model_name
        self.clock = clock
        self.stage: Literal["serving", "candidate"] = "serving"

    def publish(
        self,
        version: str,
        tensors: dict[str, torch.Tensor],
        parent: tuple[str, dict[str, torch.Tensor]] | None,
        manifest: Manifest,
        window: TrainingWindow | None,
    ) -> Publication:
        path = self.store.save_full(self.model_name, tensors, manifest)
        published_at = self.clock()
        update = ModelUpdate(
            model_name=self.model_name,
            version=version,
            kind="full",
            stage=self.stage,
            sha256=self.store.digest(self.model_name, version),
            metrics={k: float(v) for k, v in manifest.metrics.items()},
            window=window,
            published_at=published_at,
        )
        return Publication(version, "full", str(path), row_count(tensors), published_at, update)

    def retire(self, log: ModelLog, model_name: str) -> list[str]:
        """The log forgets what no serving state reaches again; with no topic, no tombstone."""
        retired = log.retirable(model_name)
        for version in retired:
            log.retire(model_name, version)
        return retired


class ReplayTrainer(OnlineTrainer):
    """The online trainer without its recovery checkpoints (a replay is not resumed), keeping
    its gate's decisions for the report."""

    def __init__(self, settings: TrainSettings, publisher: Publisher,
                 clock: Callable[[], float]) -> None:
        self.decisions: list[GateDecision] = []
        super().__init__(settings, settings.model, publisher, clock)

    def checkpoint(self) -> None:
        return None

    def maybe_publish(self) -> GateDecision:
        decision = super().maybe_publish()
        self.decisions.append(decision)
        return decision


@dataclass(frozen=True)
class Served:
    bundle: ModelBundle
    serves_from: float


@dataclass
class PretrainReport:
    events: int
    epochs: int
    best_epoch: int
    seconds: float
    validation: dict[str, float]


class TrainerLane:
    """The trainer fed the replay's micro-batches in order, and the versions it published."""

    def __init__(self, settings: TrainSettings, serve: ServeSettings, load_s: float) -> None:
        self.settings = settings
        self.serve = serve
        self.load_s = load_s
        self.now = 0.0
        self.trainer: ReplayTrainer | None = None
        self.versions: list[Served] = []
        self.pretrain: PretrainReport | None = None
        self._batches = 0
        self._published = 0

    def bootstrap(self, timeline: Timeline, now: float, cache: Path | None = None) -> None:
        """Pre-trains on the timeline's first part and publishes version 1.0 at `now`. With a
        `cache` folder, a pre-training of the same events and configuration is reused."""
        s = self.settings
        key = _pretrain_key(timeline, s)
        cached = cache / key if cache is not None else None
        if cached is not None and (cached / "report.json").exists():
            shutil.copytree(cached / "state", s.state_dir)
            self.pretrain = PretrainReport(**json.loads((cached / "report.json").read_text()))
        else:
            self.pretrain = self._pretrain(timeline)
            if cached is not None:
                shutil.copytree(s.state_dir, cached / "state", dirs_exist_ok=True)
                (cached / "report.json").write_text(json.dumps(asdict(self.pretrain)))
        self.now = now
        store = ModelStore(s.store_dir)
        self.trainer = ReplayTrainer(s, StorePublisher(store, s.model_name, self._clock),
                                     self._clock)
        self.trainer.publish(None, major=True)
        self._load_new(now)

    def _pretrain(self, timeline: Timeline) -> PretrainReport:
        """The demo's bootstrap: a full retrain of the first part, checkpointed."""
        started = time.perf_counter()
        first = [
            Interaction(u, i, int(t))
            for u, i, t in zip(timeline.first_users, timeline.first_items,
                               timeline.first_times, strict=True)
        ]
        s = self.settings
        result = full_retrain(first, OnlineModel(s.model), s.model)
        model = result.model
        CheckpointStore(s.state_dir).save(
            model.tensors(), model.trainer.optimizer.state_dict(), model.items, model.histories,
            TrainerState(),
        )
        return PretrainReport(len(first), result.report.epochs, result.report.best_epoch,
                              round(time.perf_counter() - started, 1),
                              {k: round(v, 4) for k, v in result.validation.items()})

    def _clock(self) -> float:
        return self.now

    @property
    def frozen(self) -> ModelBundle:
        return self.versions[0].bundle

    def learn_until(self, timeline: Timeline, until: float, learn: bool) -> None:
        """Feeds every micro-batch consumed by `until` (`learn` False: the trainer is off)."""
        assert self.trainer is not None
        while self._batches < len(timeline.batch_ends):
            closed = float(timeline.batch_closed[self._batches])
            if closed > until:
                return
            start = int(timeline.batch_ends[self._batches - 1]) if self._batches else 0
            end = int(timeline.batch_ends[self._batches])
            self._batches += 1
            if not learn:
                continue
            self.now = closed
            self.trainer.train_batch([_envelope(timeline, j) for j in range(start, end)])
            self._load_new(closed)

    def _load_new(self, published_at: float) -> None:
        assert self.trainer is not None
        for publication in self.trainer.publications[self._published :]:
            bundle = load_session_bundle(
                self.settings.store_dir, self.settings.model_name, publication.version,
                publication.update.sha256, self.serve.retrieval, self.serve.history_length,
                published_at, self.serve.encoder_cpu_runtime,
            )
            self.versions.append(Served(bundle, published_at + self.load_s))
        self._published = len(self.trainer.publications)

    def serving_at(self, t: float) -> ModelBundle:
        """The newest version the scorer answers with at time t."""
        current = self.versions[0].bundle
        for served in self.versions:
            if served.serves_from <= t:
                current = served.bundle
        return current


def _pretrain_key(timeline: Timeline, settings: TrainSettings) -> str:
    digest = hashlib.sha256(settings.model.model_dump_json().encode())
    digest.update(str(settings.item_limits()).encode())
    for values in (timeline.first_users, timeline.first_items):
        digest.update("\x1f".join(values).encode())
    digest.update(timeline.first_times.tobytes())
    return digest.hexdigest()[:20]


def _envelope(timeline: Timeline, j: int) -> Envelope[InteractionEvent]:
    t = float(timeline.times[j])
    event = InteractionEvent(
        event_id=f"r{j}", user_id=timeline.users[j], session_id=f"{timeline.users[j]}-live",
        item_id=timeline.items[j], event_type=EventType.CLICK, timestamp=t,
    )
    return Envelope(event, timeline.users[j].encode(), SourcePosition("interactions", 0, j,
                                                                      int(t * 1000)), b"")


def train_settings(work: Path, pretrain_budget_s: float, publish_every_s: float,
                   threads: int, overrides: dict[str, Any] | None = None) -> TrainSettings:
    """The trainer's defaults, with the replay's folders, pre-training budget and cadence, and
    `overrides` (`model.<field>` for the session model's configuration), validated."""
    model_fields = {k[len("model."):]: v for k, v in (overrides or {}).items()
                    if k.startswith("model.")}
    fields = {k: v for k, v in (overrides or {}).items() if not k.startswith("model.")}
    base = TrainSettings(state_dir=work / "state", store_dir=work / "store",
                         publish_every_s=publish_every_s, threads=threads)
    model = SessionTransformerConfig.model_validate({
        **base.model.model_dump(), "time_budget_s": pretrain_budget_s, "threads": threads,
        **model_fields,
    })
    return TrainSettings.model_validate({**base.model_dump(), **fields, "model": model})
