"""Baselines score what they claim to on hand-made sequences."""

from __future__ import annotations

import numpy as np

from models.lab.baselines import ItemKNN, Markov, Popularity, RecentPopularity
from models.sequences import Queries, UserSequences


def _train() -> UserSequences:
    items = [np.array([1, 2, 3]), np.array([1, 2, 4]), np.array([2, 3, 1]), np.array([5, 1, 2])]
    times = [np.array([10, 20, 30]), np.array([11, 21, 31]), np.array([12, 22, 32]),
             np.array([100, 101, 102])]
    return UserSequences(items, times, n_items=5)


def _query(history: list[int], at: int) -> Queries:
    return Queries([np.array(history)], [np.arange(len(history))], np.array([at]), np.array([1]))


def test_popularity_orders_by_training_counts() -> None:
    model = Popularity()
    model.fit(_train())
    scores = model.score(_query([5], 200))[0]
    assert list(np.argsort(-scores[1:])[:2] + 1) == [1, 2]  # 4 events each, 1 before 2 (tie)
    assert scores[3] > scores[4]


def test_recent_popularity_counts_only_the_window_before_the_request() -> None:
    model = RecentPopularity(window_s=5)
    model.fit(_train())
    scores = model.score(_query([3], 103))[0]
    assert scores[5] >= 1 and scores[1] >= 1 and scores[2] >= 1  # events at 100..102
    assert scores[3] < 1 and scores[4] < 1  # only tie-breaking mass outside the window
    early = model.score(_query([3], 100))[0]
    assert early[5] < 1  # the event at t=100 is not before a request at t=100


def test_markov_follows_observed_transitions() -> None:
    model = Markov()
    model.fit(_train())
    scores = model.score(_query([1], 200))[0]
    assert int(np.argmax(scores[1:]) + 1) == 2  # 1 -> 2 three times out of three
    scores = model.score(_query([2], 200))[0]
    assert scores[3] > scores[4] > 0.0  # 2 -> 3 twice, 2 -> 4 once


def test_item_knn_scores_cosine_co_occurrence() -> None:
    model = ItemKNN(recency_decay=1.0)
    model.fit(_train())
    scores = model.score(_query([4], 200))[0]
    # Item 4 only co-occurs (user 1) with items 1 and 2: cos = 1 / sqrt(1 * 4) each.
    assert np.isclose(scores[1], 0.5, atol=1e-4) and np.isclose(scores[2], 0.5, atol=1e-4)
    assert scores[5] < 1e-3
    assert scores[4] < 1e-3  # an item is not its own neighbour


def test_item_knn_recency_decay_favours_recent_history() -> None:
    model = ItemKNN(recency_decay=0.1)
    model.fit(_train())
    scores = model.score(_query([4, 5], 200))[0]
    assert scores[1] > scores[3]  # 5's neighbour (1) beats 4's weaker, older evidence
