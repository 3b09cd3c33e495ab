"""Before the live phase: per-run isolation (topic and key prefixes, state folders), the first
model pre-trained on the first part of the dataset and published, and that same history replayed
into the stream so user histories (Redis features) exist when the live phase starts."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from deploy.demo.settings import DemoSettings
from deploy.generators.dataset_replay import frame_events, frame_items
from deploy.local.settings import LocalStackSettings
from models.store import ModelStore
from online_trainer.checkpoint import CheckpointStore, TrainerState
from online_trainer.online_model import Interaction, OnlineModel
from online_trainer.publisher import Publication, Publisher
from online_trainer.retrain import full_retrain
from online_trainer.settings import TrainSettings
from online_trainer.trainer import OnlineTrainer
from schemas.topics import CATALOG_ITEMS, INTERACTIONS
from streams.kafka.connection import KafkaConnection
from streams.kafka.principals import ADMIN
from streams.kafka.producer import EventProducer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunLayout:
    run_id: str
    root: Path
    kafka: KafkaConnection
    redis_prefix: str

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def state_dir(self) -> Path:
        return self.root / "trainer"

    @property
    def store_dir(self) -> Path:
        return self.root / "models"


def layout(settings: DemoSettings, local: LocalStackSettings) -> RunLayout:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    run_id = f"demo{stamp.replace('-', '')}"
    root = (settings.reports_dir / f"demo-{stamp}").resolve()
    root.mkdir(parents=True, exist_ok=False)
    (root / "logs").mkdir()
    # The run's own setup (topics, ACLs) logs in as admin; every other client as its role.
    kafka = KafkaConnection(
        bootstrap_servers=f"{local.host}:{local.kafka_port}", topic_prefix=f"{run_id}.",
        secrets_dir=local.secrets_dir.resolve(), sasl_username=ADMIN,
    )
    return RunLayout(run_id, root, kafka, f"sr:{run_id}:")


def service_env(run: RunLayout, local: LocalStackSettings) -> dict[str, str]:
    """What every child shares; each service adds its own (group ids differ per service)."""
    return {
        "STREAMREC_KAFKA__BOOTSTRAP_SERVERS": run.kafka.bootstrap_servers,
        "STREAMREC_KAFKA__TOPIC_PREFIX": run.kafka.topic_prefix,
        "STREAMREC_KAFKA__SECRETS_DIR": str(local.secrets_dir.resolve()),
        "STREAMREC_REDIS__HOST": local.host,
        "STREAMREC_REDIS__PORT": str(local.redis_port),
        "STREAMREC_REDIS__SECRETS_DIR": str(local.secrets_dir.resolve()),
        "STREAMREC_REDIS__KEY_PREFIX": run.redis_prefix,
    }


def pretrain_and_publish(settings: TrainSettings, first: pd.DataFrame) -> Publication:
    """Full retrain on `first`, checkpointed as the trainer's start, published as version 1.0."""
    interactions = [
        Interaction(str(u), str(i), int(t))
        for u, i, t in zip(first["user_id"], first["item_id"], first["timestamp"], strict=True)
    ]
    result = full_retrain(interactions, OnlineModel(settings.model), settings.model)
    model = result.model
    CheckpointStore(settings.state_dir).save(
        model.tensors(), model.trainer.optimizer.state_dict(), model.items, model.histories,
        TrainerState(),
    )
    producer = EventProducer(settings.kafka)
    publisher = Publisher(
        ModelStore(settings.store_dir), producer, settings.kafka, settings.model_name,
        settings.full_publish_share,
    )
    # The trainer restores the checkpoint; publishing from it records what serves in it too.
    publication = OnlineTrainer(settings, settings.model, publisher).publish(None, major=True)
    producer.close()
    logger.info("pretrained events=%d version=%s", len(interactions), publication.version)
    return publication


def publish_catalog(kafka: KafkaConnection, items: pd.DataFrame) -> int:
    """The dataset's item metadata (genres, release year) to `catalog.items`."""
    producer = EventProducer(kafka)
    topic = kafka.topic(CATALOG_ITEMS)
    count = 0
    for item in frame_items(items, time.time()):
        producer.send(topic, item.item_id, item)
        count += 1
    producer.close()
    return count


def backfill(kafka: KafkaConnection, first: pd.DataFrame, end_at: float) -> int:
    """The pre-training history as past events (the newest at `end_at`), unpaced."""
    producer = EventProducer(kafka)
    topic = kafka.topic(INTERACTIONS)
    count = 0
    for event in frame_events(first, shift_to_now=end_at):
        producer.send(topic, event.user_id, event)
        count += 1
    producer.close()
    return count
