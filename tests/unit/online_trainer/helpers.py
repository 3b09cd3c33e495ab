"""Small, fast fixtures for the trainer's pure logic: a tiny model and synthetic envelopes."""

from __future__ import annotations

from pathlib import Path

from deploy.generators.sample import SampleConfig, SampleGenerator
from models.session_config import SessionTransformerConfig
from online_trainer.settings import TrainSettings
from schemas import InteractionEvent
from streams.kafka.contract_loop import Envelope
from streams.kafka.deadletter import SourcePosition

TINY = SessionTransformerConfig(
    dim=16,
    heads=1,
    layers=1,
    max_len=20,
    dropout=0.0,
    batch_size=64,
    epochs=3,
    eval_every=1,
    lr=5e-3,
    time_budget_s=60,
)


def settings(tmp: Path, **changes: object) -> TrainSettings:
    base: dict[str, object] = {
        "state_dir": tmp / "state",
        "store_dir": tmp / "store",
        "model": TINY,
        "publish_every_s": 1e9,
        "checkpoint_every_batches": 1_000_000,
        "gate_min_events": 10,
    }
    return TrainSettings(**{**base, **changes})  # type: ignore[arg-type]


def envelopes(
    n: int, seed: int = 3, items: int = 60, start_offset: int = 0
) -> list[Envelope[InteractionEvent]]:
    events = SampleGenerator(
        SampleConfig(users=30, items=items, categories=4, seed=seed), start_ts=1.7e9
    ).events(n)
    return [
        Envelope(
            e, e.user_id.encode(), SourcePosition("interactions", 0, start_offset + i, None), b""
        )
        for i, e in enumerate(events)
    ]
