"""Ranking metrics against hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from models.metrics import NEVER, exclude, metrics_from_ranks, target_ranks


def test_ranks_are_one_based_and_pessimistic_about_ties() -> None:
    scores = np.array([[0.0, 0.9, 0.5, 0.5, 0.1]], dtype=np.float32)
    assert target_ranks(scores, np.array([1])).tolist() == [1]
    assert target_ranks(scores, np.array([2])).tolist() == [3]  # tie with item 3 ranks below it
    assert target_ranks(scores, np.array([4])).tolist() == [4]


def test_metrics_match_hand_computation() -> None:
    ranks = np.array([1, 3, 10, 15, 21])
    m = metrics_from_ranks(ranks)
    assert m["hr@10"] == pytest.approx(3 / 5)
    assert m["ndcg@10"] == pytest.approx((1.0 + 1 / math.log2(4) + 1 / math.log2(11)) / 5)
    assert m["recall@20"] == pytest.approx(4 / 5)
    assert m["mrr@20"] == pytest.approx((1 + 1 / 3 + 1 / 10 + 1 / 15) / 5)


def test_excluded_target_never_hits() -> None:
    scores = np.array([[0.0, 0.9, 0.8, 0.1]], dtype=np.float32)
    exclude(scores, [np.array([2])])
    assert scores[0, 0] == -np.inf
    assert target_ranks(scores, np.array([2])).tolist() == [NEVER]
    assert target_ranks(scores, np.array([3])).tolist() == [2]
    assert metrics_from_ranks(np.array([NEVER]))["hr@10"] == 0.0


def test_empty_evaluation_is_an_error() -> None:
    with pytest.raises(ValueError):
        metrics_from_ranks(np.array([], dtype=np.int64))
