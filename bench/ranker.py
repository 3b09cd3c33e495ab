"""A ranker for `streamrec bench serve`: trained through the online trainer's own path and gate.

The bench has no logged traffic with outcomes yet, so it generates labelled lists in the serving
feature set's shape (models.point_in_time.SERVING_FEATURE_NAMES): ten shown candidates in
retrieval order each, the acted-on one the most similar to the user's last item (`sim_last`),
which retrieval order alone misses. They go through `RankerTraining` in micro-batches, as
`ranker.examples` would; the bench serves the version the gate promoted, so the ranking stage
runs a trained model, never random weights.
"""

from __future__ import annotations

import numpy as np

from models.point_in_time import SERVING_FEATURE_NAMES, SERVING_FEATURE_SET
from models.store import ModelStore
from online_trainer.ranker_training import RankerTraining
from schemas.model_updates import ModelUpdate
from schemas.ranker_examples import RankerExample, encode_vectors

SIGNAL = SERVING_FEATURE_NAMES.index("sim_last")
SHOWN = 10
EPOCHS = 6
LISTS = 300


def generated_examples(n: int, seed: int, served_at: float) -> list[RankerExample]:
    rng = np.random.default_rng(seed)
    width = len(SERVING_FEATURE_NAMES)
    out = []
    for k in range(n):
        vectors = rng.normal(size=(SHOWN, width)).astype(np.float32)
        vectors[:, 0] = np.sort(rng.normal(size=SHOWN))[::-1]  # retrieval order
        grades = [0] * SHOWN
        grades[int(np.argmax(vectors[:, SIGNAL]))] = 1
        out.append(RankerExample(
            request_id=f"bench-{seed}-{k}", user_id=f"bench-u{k}", served_at=served_at,
            features_at=served_at, model_version="1.0", feature_set=SERVING_FEATURE_SET,
            n_features=width, candidates=[f"i{j}" for j in range(SHOWN)],
            vectors=encode_vectors(vectors), grades=grades, labelled_at=served_at,
        ))
    return out


def train_bench_ranker(store: ModelStore, served_at: float) -> ModelUpdate:
    """Trains until the gate promotes a version; its `ModelUpdate` (stored, with its digest)."""
    training = RankerTraining(store, held_back=100, gate_every=2)
    for epoch in range(EPOCHS):
        examples = generated_examples(LISTS, epoch, served_at)
        for lo in range(0, LISTS, 50):
            training.step(examples[lo : lo + 50], now=served_at)
        if training.published:
            return training.published[-1]
    raise RuntimeError(f"the gate promoted no ranker: {training.decisions}")
