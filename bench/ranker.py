"""The logged DLRM ranker in the benches.

`streamrec bench ranker`: its training micro-batch and its scoring call side by side on the
devices this machine has: CPU, and on CUDA eager (bf16 autocast in training) and the CUDA-graph
replays the scorer uses. Scoring is timed for a scorer micro-batch of candidates (the scorer
scores a whole micro-batch's candidates in one call), host transfers included.

`train_bench_ranker`: a ranker for `streamrec bench serve`, trained through the online
trainer's own path and gate. The bench has no logged traffic with outcomes yet, so it
generates labelled lists in the serving feature set's shape
(models.point_in_time.SERVING_FEATURE_NAMES): a hundred logged candidates in retrieval order
each (the scorer's `logged_candidates`), the acted-on one the most similar to the user's last
item (`sim_last`), which retrieval order alone misses. They go through `RankerTraining` in
micro-batches, as `ranker.examples` would; the bench serves the version the gate promoted,
so the ranking stage runs a trained model, never random weights.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from bench.report import percentile, print_table, write_result
from models.logged_ranker import GradedList, LoggedRanker
from models.point_in_time import SERVING_FEATURE_NAMES, SERVING_FEATURE_SET
from models.store import ModelStore
from online_trainer.ranker_training import RankerTraining
from schemas.model_updates import ModelUpdate
from schemas.ranker_examples import RankerExample, encode_vectors

SIGNAL = SERVING_FEATURE_NAMES.index("sim_last")
CANDIDATES = 100
EPOCHS = 6
LISTS = 300


SCORE_ROWS = (100, 1_000, 4_000)
"""Candidates per scoring call: one request of 100, and micro-batches of 10 and 40 requests."""
TRAIN_LISTS = 50


def graded_lists(n: int, seed: int) -> list[GradedList]:
    """Lists of logged candidates in retrieval order, the acted-on one the most similar to the
    user's last item."""
    rng = np.random.default_rng(seed)
    width = len(SERVING_FEATURE_NAMES)
    out = []
    for _ in range(n):
        vectors = rng.normal(size=(CANDIDATES, width)).astype(np.float32)
        vectors[:, 0] = np.sort(rng.normal(size=CANDIDATES))[::-1]  # retrieval order
        grades = np.zeros(CANDIDATES, dtype=np.int64)
        grades[int(np.argmax(vectors[:, SIGNAL]))] = 1
        out.append(GradedList(vectors, grades))
    return out


def generated_examples(n: int, seed: int, served_at: float) -> list[RankerExample]:
    width = len(SERVING_FEATURE_NAMES)
    return [
        RankerExample(
            request_id=f"bench-{seed}-{k}", user_id=f"bench-u{k}", served_at=served_at,
            features_at=served_at, model_version="1.0", feature_set=SERVING_FEATURE_SET,
            n_features=width, candidates=[f"i{j}" for j in range(CANDIDATES)],
            vectors=encode_vectors(item.vectors), grades=item.grades.tolist(),
            labelled_at=served_at,
        )
        for k, item in enumerate(graded_lists(n, seed))
    ]


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


def _paths() -> dict[str, LoggedRanker]:
    width = len(SERVING_FEATURE_NAMES)
    paths = {"cpu": LoggedRanker(width, device=torch.device("cpu"))}
    if torch.cuda.is_available():
        cuda = torch.device("cuda")
        paths["cuda eager"] = LoggedRanker(width, device=cuda, score_buckets=())
        paths["cuda graphs"] = LoggedRanker(width, device=cuda)
    return paths


def _ms(calls: int, fn: Callable[[], object]) -> dict[str, float]:
    for _ in range(5):
        fn()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return {"p50": round(percentile(times, 50), 3), "p99": round(percentile(times, 99), 3)}


def _timed(ranker: LoggedRanker, calls: int) -> dict[str, dict[str, float]]:
    lists = graded_lists(TRAIN_LISTS, seed=0)
    out = {"train_micro_batch_ms": _ms(calls, lambda: ranker.partial_fit(lists))}
    for rows in SCORE_ROWS:
        vectors = np.concatenate([item.vectors for item in graded_lists(rows // CANDIDATES, 1)])
        out[f"score_{rows}_ms"] = _ms(calls, functools.partial(ranker.score, vectors))
    return out


def run(json_path: Path, calls: int) -> None:
    """Training and scoring time of the logged ranker on each path this machine has."""
    torch.set_num_threads(1)  # as in the scorer: one intra-op thread per process
    paths = {name: _timed(ranker, calls) for name, ranker in _paths().items()}
    write_result(json_path, {
        "paths": paths, "train_lists": TRAIN_LISTS, "candidates": CANDIDATES, "calls": calls,
        "features": len(SERVING_FEATURE_NAMES),
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
    })
    figures = ("train_micro_batch_ms", *(f"score_{rows}_ms" for rows in SCORE_ROWS))
    print_table("bench ranker (p50 ms)", [
        (f"{name}: {' / '.join(figures)}",
         " / ".join(f"{timed[f]['p50']:.3f}" for f in figures))
        for name, timed in paths.items()
    ])
