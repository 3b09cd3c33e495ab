"""Both rankers learn a signal the retriever lacks; the correction ranker starts from the
retriever's order."""

from __future__ import annotations

import numpy as np
import pytest

from models.lab.correction_ranker import CorrectionRanker, CorrectionRankerConfig
from models.lab.gbm_ranker import GBMRanker, GBMRankerConfig
from models.lab.ranking import Ranker, RankingExamples, ndcg_at_10, reranked_ranks

K, DIM, N_FEATURES = 20, 8, 4


def _examples(n_queries: int, seed: int) -> RankingExamples:
    """The retriever finds every target but ranks it at random; feature 2 marks the target
    with noise, so a ranker that reads it beats retrieval order."""
    rng = np.random.default_rng(seed)
    n_items = 200
    candidates = np.stack([rng.choice(np.arange(1, n_items + 1), K, replace=False)
                           for _ in range(n_queries)]).astype(np.int64)
    labels = np.zeros((n_queries, K), dtype=np.float32)
    labels[np.arange(n_queries), rng.integers(0, K, n_queries)] = 1.0
    retriever = rng.normal(size=(n_queries, K)).astype(np.float32)
    features = rng.normal(size=(n_queries, K, N_FEATURES)).astype(np.float32)
    features[:, :, 0] = retriever
    features[:, :, 2] += 2.5 * labels
    return RankingExamples(
        features=features, retriever_scores=retriever, candidates=candidates,
        valid=np.ones((n_queries, K), dtype=bool), labels=labels,
        query_vectors=rng.normal(size=(n_queries, DIM)).astype(np.float32),
        item_vectors=rng.normal(size=(n_items + 1, DIM)).astype(np.float32),
        last_items=rng.integers(1, n_items + 1, n_queries).astype(np.int64),
    )


def _ndcg(ranker: Ranker, examples: RankingExamples) -> float:
    return float(ndcg_at_10(reranked_ranks(ranker.score(examples), examples)).mean())


@pytest.mark.parametrize("ranker", [
    CorrectionRanker(CorrectionRankerConfig(epochs=40, patience=10, n_models=2)),
    GBMRanker(GBMRankerConfig(n_estimators=100, min_child_samples=10)),
], ids=["dlrm", "gbm"])
def test_ranker_learns_a_feature_the_retriever_lacks(ranker: Ranker) -> None:
    train, test = _examples(300, seed=0), _examples(200, seed=1)
    ranker.fit(train)
    retrieval_order = float(ndcg_at_10(reranked_ranks(test.retriever_scores, test)).mean())
    assert _ndcg(ranker, test) > retrieval_order + 0.2


def test_correction_ranker_untrained_keeps_the_retriever_order() -> None:
    examples = _examples(50, seed=2)
    ranker = CorrectionRanker(CorrectionRankerConfig(epochs=1, lr=1e-12))
    ranker.fit(examples)
    scores = ranker.score(examples)
    np.testing.assert_array_equal(np.argsort(-scores, axis=1),
                                  np.argsort(-examples.retriever_scores, axis=1))


def test_a_target_outside_the_candidates_never_hits() -> None:
    examples = _examples(3, seed=3)
    labels = examples.labels.copy()
    labels[1] = 0.0
    missed = RankingExamples(**{**examples.__dict__, "labels": labels})
    ranks = reranked_ranks(missed.retriever_scores, missed)
    assert ndcg_at_10(ranks)[1] == 0.0
    assert ranks[0] >= 1
