"""Two-stage offline evaluation: the session Transformer retrieves, a ranker re-orders.

For each evaluation query the fitted Transformer's top-k (already-seen items excluded, as in its
own row) become the candidates; their point-in-time features are computed as of the query's
time (:mod:`models.point_in_time`). Rankers are fitted on positions strictly before each user's
test event: the validation position (second-to-last event, never a training label of the
retriever) and the :data:`EARLIER_POSITIONS` events before it, and scored on the test queries.
The earlier positions were training labels of the retriever, so its scores there are more
confident than on unseen events (ML-100K: NDCG@10 about 0.20 there against 0.13 on validation);
they still quadruple the ranker's training queries, which the tree ranker needs most. Every row is
compared paired with the same retriever checkpoint: the ratio of mean NDCG@10 and a paired
bootstrap 95% interval of the per-query NDCG@10 difference (:mod:`models.lab.paired_bootstrap`).

A target the retriever did not put in its top-k is a miss for every ranker, so the retriever's
recall@k bounds any two-stage row; it is reported beside them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from models.item_content import ItemContent
from models.lab.paired_bootstrap import paired_bootstrap_ci
from models.lab.ranking import Ranker, RankingExamples, ndcg_at_10, reranked_ranks
from models.metrics import exclude, metrics_from_ranks, target_ranks
from models.point_in_time import FEATURE_NAMES, InteractionLog, candidate_features
from models.sequence_training import SessionTrainer
from models.sequences import LeaveOneOutSplit, Queries

log = logging.getLogger(__name__)
FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]
TOP_K = 100
EARLIER_POSITIONS = 3
"""Events before each user's validation event that also become ranker training queries."""
BOOTSTRAP_RESAMPLES = 2000
RANKER_TRAINING = (
    f"each user's validation position (second-to-last event) and the {EARLIER_POSITIONS} events "
    "before it, all strictly before the test event; features as of each position's time"
)


@dataclass(frozen=True)
class Stage:
    """One query set's candidates as ranking examples and the retriever's own target ranks."""

    examples: RankingExamples
    retriever_ranks: IntArray


def retrieval_stage(
    trainer: SessionTrainer, queries: Queries, log_: InteractionLog, content: ItemContent,
    exclude_seen: bool, k: int = TOP_K,
) -> Stage:
    """The retriever's top-k per query with their point-in-time features."""
    scores = trainer.score(queries)
    if exclude_seen:
        scores = exclude(scores, queries.histories)
    else:
        scores[:, 0] = -np.inf
    ranks = target_ranks(scores, queries.targets)
    k = min(k, scores.shape[1] - 1)
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
    candidates = np.take_along_axis(top, order, axis=1).astype(np.int64)
    picked = np.take_along_axis(scores, candidates, axis=1)
    valid = np.isfinite(picked)
    floor = np.where(valid, picked, np.inf).min(axis=1, keepdims=True)
    floor = np.where(np.isfinite(floor), floor, 0.0)
    retriever = np.where(valid, picked, floor - 1.0).astype(np.float32)
    query_vectors = trainer.encode_histories(queries.histories, queries.history_times)
    query_np = query_vectors.cpu().numpy().astype(np.float32)
    item_vectors = trainer.model.item_vectors().detach().float().cpu().numpy()
    features = candidate_features(log_, content, item_vectors, queries, query_np, candidates,
                                  retriever)
    labels = ((candidates == queries.targets[:, None]) & valid).astype(np.float32)
    last_items = np.array([h[-1] if len(h) else 0 for h in queries.histories], dtype=np.int64)
    examples = RankingExamples(features, retriever, candidates, valid, labels, query_np,
                               item_vectors, last_items)
    return Stage(examples, ranks)


def two_stage_rows(
    split: LeaveOneOutSplit, trainer: SessionTrainer, content: ItemContent,
    rankers: Sequence[Ranker], exclude_seen: bool = True, k: int = TOP_K, seed: int = 0,
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Report rows of each ranker and a summary of the retrieval stage."""
    log_ = InteractionLog.from_split(split)
    fit_queries = [split.validation, *earlier_positions(split, EARLIER_POSITIONS)]
    fit_examples = RankingExamples.concat([
        retrieval_stage(trainer, queries, log_, content, exclude_seen, k).examples
        for queries in fit_queries
    ])
    test_stage = retrieval_stage(trainer, split.test, log_, content, exclude_seen, k)
    retriever_ndcg = ndcg_at_10(test_stage.retriever_ranks)
    rows: dict[str, dict[str, Any]] = {}
    for ranker in rankers:
        start, cpu_start = time.perf_counter(), time.process_time()
        ranker.fit(fit_examples)
        train_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu_start
        ranks = reranked_ranks(ranker.score(test_stage.examples), test_stage.examples)
        rows[ranker.name] = {
            **metrics_from_ranks(ranks),
            "train_s": round(train_s, 2), "train_cpu_s": round(cpu_s, 2),
            "selected": getattr(ranker, "chosen", {}),
            "vs_transformer": paired_comparison(ndcg_at_10(ranks), retriever_ndcg, seed),
        }
        log.info("ranker=%s ndcg10=%.4f ratio=%.3f", ranker.name, rows[ranker.name]["ndcg@10"],
                 rows[ranker.name]["vs_transformer"]["ratio"])
    summary = {
        "retriever": "session_transformer",
        "candidates": int(test_stage.examples.candidates.shape[1]),
        f"recall@{k}": float((test_stage.retriever_ranks <= k).mean()),
        "ranker_training": RANKER_TRAINING,
        "ranker_training_queries": len(fit_examples),
        "features": list(FEATURE_NAMES),
        "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
    }
    return rows, summary


def earlier_positions(split: LeaveOneOutSplit, n: int) -> list[Queries]:
    """Queries for each user's n training events before the validation one (newest first): the
    history before the event, the event's time and item as the target."""
    positions = []
    for back in range(1, n + 1):
        rows = [
            (items[:-back], times[:-back], int(times[-back]), int(items[-back]))
            for items, times in zip(split.train.items, split.train.times, strict=True)
            if len(items) > back
        ]
        positions.append(Queries(
            histories=[r[0] for r in rows], history_times=[r[1] for r in rows],
            query_times=np.array([r[2] for r in rows], dtype=np.int64),
            targets=np.array([r[3] for r in rows], dtype=np.int64),
        ))
    return positions


def paired_comparison(
    ranker_ndcg: npt.NDArray[np.float64], retriever_ndcg: npt.NDArray[np.float64], seed: int
) -> dict[str, Any]:
    """Ratio of mean NDCG@10 and the paired bootstrap 95% interval of the difference."""
    base = float(retriever_ndcg.mean())
    low, high = paired_bootstrap_ci(ranker_ndcg, retriever_ndcg, BOOTSTRAP_RESAMPLES, seed=seed)
    return {
        "ratio": float(ranker_ndcg.mean()) / base if base > 0 else float("inf"),
        "ndcg@10_diff": float(ranker_ndcg.mean()) - base,
        "ci95": [low, high],
    }
