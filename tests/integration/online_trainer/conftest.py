from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from deploy.generators.dataset_replay import frame_events
from models.datasets import load_ml100k
from models.session_config import SessionTransformerConfig
from online_trainer.settings import TrainSettings
from schemas.topics import INTERACTIONS
from streams.kafka.connection import KafkaConnection
from streams.kafka.principals import TRAINER
from streams.kafka.producer import EventProducer

TINY = SessionTransformerConfig(
    dim=16,
    heads=1,
    layers=1,
    max_len=30,
    dropout=0.1,
    batch_size=64,
    epochs=4,
    eval_every=1,
    lr=5e-3,
    time_budget_s=60,
    threads=1,
)


@pytest.fixture(scope="session")
def ml100k() -> pd.DataFrame:
    """MovieLens-100K in time order (downloaded once, checksum-verified, cached)."""
    return load_ml100k().sort_values("timestamp", kind="stable").reset_index(drop=True)


def publish(kafka: KafkaConnection, frame: pd.DataFrame) -> int:
    producer = EventProducer(kafka)
    topic = kafka.topic(INTERACTIONS)
    count = 0
    for event in frame_events(frame):
        producer.send(topic, event.user_id, event)
        count += 1
    producer.close()
    return count


def train_settings(kafka: KafkaConnection, tmp: Path, **changes: object) -> TrainSettings:
    base: dict[str, object] = {
        "kafka": kafka.as_principal(TRAINER),
        "model": TINY,
        "state_dir": tmp / "state",
        "store_dir": tmp / "store",
        "group_id": f"trainer-{kafka.topic_prefix}",
        "alerts_group_id": f"alerts-{kafka.topic_prefix}",
        "batch_size": 500,
        "batch_timeout_s": 0.2,
        "publish_every_s": 1.0,
        "gate_min_events": 50,
        "retrain_budget_s": 30.0,
    }
    return TrainSettings(**{**base, **changes})  # type: ignore[arg-type]
