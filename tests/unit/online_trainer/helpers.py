"""Small, fast fixtures for the trainer's pure logic: a tiny model and synthetic envelopes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from deploy.generators.sample import SampleConfig, SampleGenerator
from models.point_in_time import SERVING_FEATURE_NAMES, SERVING_FEATURE_SET
from models.session_config import SessionTransformerConfig
from online_trainer.ranker_training import RankerTraining
from online_trainer.settings import TrainSettings
from schemas import InteractionEvent
from schemas.ranker_examples import RankerExample, encode_vectors
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


T0 = 1_750_000_000.0
WIDTH = len(SERVING_FEATURE_NAMES)


def ranker_examples(n: int, seed: int, signal: bool = True,
                    feature_set: str = SERVING_FEATURE_SET, model_version: str = "1.0"
                    ) -> list[RankerExample]:
    """10 shown candidates in retrieval order each; with `signal` the acted-on one is the
    candidate most similar to the user's last item (sim_last), which retrieval misses."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        vectors = rng.normal(size=(10, WIDTH)).astype(np.float32)
        vectors[:, 0] = np.sort(rng.normal(size=10))[::-1]
        grades = [0] * 10
        grades[int(np.argmax(vectors[:, 3])) if signal else int(rng.integers(10))] = 2
        out.append(RankerExample(
            request_id=f"r{seed}-{k}", user_id=f"u{k}", served_at=T0 + k, features_at=T0 + k,
            model_version=model_version, feature_set=feature_set, n_features=WIDTH,
            candidates=[f"i{j}" for j in range(10)], vectors=encode_vectors(vectors),
            grades=grades, labelled_at=T0 + k + 60,
        ))
    return out


def train_ranker(training: RankerTraining, examples: list[RankerExample]) -> None:
    for lo in range(0, len(examples), 50):
        training.step(examples[lo : lo + 50], now=T0)
