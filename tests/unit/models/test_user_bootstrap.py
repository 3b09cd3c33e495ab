"""Ratio intervals over users: a clearly better arm's interval lies above 1, equal arms' holds 1."""

from __future__ import annotations

import numpy as np
import pytest

from models.user_bootstrap import (
    ArmUsers,
    adjusted_ratio_ci,
    independent_ratio_ci,
    paired_ratio_ci,
    ratio,
)


def _users(n: int = 400, rate: float = 0.1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    requests = rng.integers(1, 40, size=n).astype(np.float64)
    return rng.binomial(requests.astype(np.int64), rate).astype(np.float64), requests


def test_the_ratio_is_of_the_arms_pooled_rates() -> None:
    hits_a, requests = np.array([1.0, 3.0]), np.array([10.0, 10.0])
    hits_b = np.array([1.0, 1.0])
    assert ratio(hits_a, requests, hits_b, requests) == pytest.approx(2.0)


def test_a_doubled_rate_on_the_same_users_has_a_paired_interval_above_one() -> None:
    hits, requests = _users()
    better = np.minimum(hits * 2, requests)
    low, high = paired_ratio_ci(better, hits, requests)
    assert 1.0 < low < high


def test_the_same_answers_give_a_paired_interval_of_exactly_one() -> None:
    hits, requests = _users()
    assert paired_ratio_ci(hits, hits.copy(), requests) == (1.0, 1.0)


def test_separate_users_at_the_same_rate_have_an_interval_holding_one() -> None:
    hits_a, requests_a = _users(seed=1)
    hits_b, requests_b = _users(seed=2)
    low, high = independent_ratio_ci(hits_a, requests_a, hits_b, requests_b)
    assert low < 1.0 < high


def test_separate_users_at_twice_the_rate_have_an_interval_above_one() -> None:
    hits_a, requests_a = _users(rate=0.2, seed=1)
    hits_b, requests_b = _users(rate=0.1, seed=2)
    assert independent_ratio_ci(hits_a, requests_a, hits_b, requests_b)[0] > 1.0


def test_uneven_inputs_are_rejected() -> None:
    with pytest.raises(ValueError):
        paired_ratio_ci(np.zeros(3), np.zeros(3), np.ones(4))


def _covaried(rng: np.random.Generator, n: int, shift: float) -> ArmUsers:
    """Users whose hit rate follows their covariate (0.05 + 0.4 x), times `shift`."""
    x = rng.uniform(size=n)
    requests = rng.integers(5, 200, size=n).astype(np.float64)
    hits = rng.binomial(requests.astype(np.int64), (0.05 + 0.4 * x) * shift).astype(np.float64)
    return ArmUsers(hits, requests, (requests * x)[:, None])


def test_cuped_narrows_the_interval_by_what_the_covariate_explains_and_keeps_it_honest() -> None:
    rng = np.random.default_rng(3)
    a, b = _covaried(rng, 150, 1.1), _covaried(rng, 150, 1.0)
    everyone = np.concatenate([a.covariates, b.covariates]).mean(axis=0)
    value, low, high = adjusted_ratio_ci(a, b, everyone, seed=1)
    plain_low, plain_high = independent_ratio_ci(a.hits, a.requests, b.hits, b.requests, seed=1)
    assert high - low < 0.75 * (plain_high - plain_low)
    assert low < 1.1 < high and low <= value <= high


def test_a_covariate_that_explains_nothing_leaves_the_ratio_as_it_was() -> None:
    rng = np.random.default_rng(4)
    a, b = _covaried(rng, 80, 1.0), _covaried(rng, 80, 1.0)
    flat_a = ArmUsers(a.hits, a.requests, np.ones((80, 1)))
    flat_b = ArmUsers(b.hits, b.requests, np.ones((80, 1)))
    value, low, high = adjusted_ratio_ci(flat_a, flat_b, np.ones(1), seed=2)
    assert value == pytest.approx(ratio(a.hits, a.requests, b.hits, b.requests))
    plain = independent_ratio_ci(a.hits, a.requests, b.hits, b.requests, seed=2)
    assert (low, high) == pytest.approx(plain)
