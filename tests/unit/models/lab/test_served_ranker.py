"""The served ranker, evaluated offline, reads the serving columns only and learns from them."""

from __future__ import annotations

import numpy as np

from models.lab.ranking import RankingExamples, ndcg_at_10, reranked_ranks
from models.lab.served_ranker import ServedRanker, ServedRankerConfig
from models.point_in_time import FEATURE_NAMES, SERVING_FEATURE_NAMES

K = 20


def _examples(n_queries: int, seed: int, signal: str) -> RankingExamples:
    """Retrieval ranks every target at random; the column `signal` marks it, with noise."""
    rng = np.random.default_rng(seed)
    labels = np.zeros((n_queries, K), dtype=np.float32)
    labels[np.arange(n_queries), rng.integers(0, K, n_queries)] = 1.0
    retriever = rng.normal(size=(n_queries, K)).astype(np.float32)
    features = rng.normal(size=(n_queries, K, len(FEATURE_NAMES))).astype(np.float32)
    features[:, :, 0] = retriever
    features[:, :, FEATURE_NAMES.index(signal)] += 2.5 * labels
    return RankingExamples(
        features=features, retriever_scores=retriever,
        candidates=rng.integers(1, 500, (n_queries, K)).astype(np.int64),
        valid=np.ones((n_queries, K), dtype=bool), labels=labels,
        query_vectors=np.zeros((n_queries, 4), np.float32),
        item_vectors=np.zeros((501, 4), np.float32),
        last_items=np.ones(n_queries, dtype=np.int64),
    )


def _ndcg(scores: np.ndarray, examples: RankingExamples) -> float:
    return float(ndcg_at_10(reranked_ranks(scores, examples)).mean())


def test_the_served_ranker_learns_a_serving_feature_the_retriever_lacks() -> None:
    signal = "item_log_since_last"
    assert signal in SERVING_FEATURE_NAMES
    train, test = _examples(400, 0, signal), _examples(200, 1, signal)
    ranker = ServedRanker(ServedRankerConfig(max_epochs=10))
    ranker.fit(train)
    assert ranker.chosen["best_epoch"] >= 1
    assert _ndcg(ranker.score(test), test) > _ndcg(test.retriever_scores, test) + 0.2


def test_the_served_ranker_never_reads_a_column_the_scorer_does_not_log() -> None:
    hidden = "item_log_count_1h"
    assert hidden not in SERVING_FEATURE_NAMES
    train = _examples(200, 2, hidden)
    ranker = ServedRanker(ServedRankerConfig(max_epochs=2, patience=1))
    ranker.fit(train)
    test = _examples(50, 3, hidden)
    scrambled = test.features.copy()
    offline_only = [j for j, name in enumerate(FEATURE_NAMES) if name not in SERVING_FEATURE_NAMES]
    scrambled[:, :, offline_only] = np.random.default_rng(4).normal(
        size=(*scrambled.shape[:2], len(offline_only)))
    other = RankingExamples(**{**test.__dict__, "features": scrambled})
    np.testing.assert_array_equal(ranker.score(test), ranker.score(other))
