"""Bootstrap intervals of a ratio of two arms' hit rates, with users as the resampled unit.

An experiment randomises users, not requests: one user's requests share the user's taste and
history, so they are not independent draws, and an interval over requests is too narrow. Each
arm's rate is its hits over its requests (a ratio estimator); a resample draws users with
replacement and recomputes both rates.

- `independent_ratio_ci`: the arms hold different users (a randomised experiment); each arm's
  users are resampled on their own.
- `rate_ci`: one arm's rate on its own users.
- `paired_ratio_ci`: both arms answered the same users (the offline counterfactual, where every
  request is answered by every arm); users are resampled together, so the user-to-user
  variance both arms share cancels.
- `adjusted_ratio_ci`: `independent_ratio_ci` with CUPED (Deng, Xu, Kohavi and Walker 2013),
  regression adjustment on covariates fixed before assignment. Each arm's rate is linearised
  (the delta method: a user's hits minus the arm's rate times the user's requests, over the
  arm's mean requests) and regressed on the covariates, pooled over both arms within arm; an
  arm's rate is then corrected by theta times how far its users' mean covariates fall from
  the mean of every user in the experiment. Assignment is random, so the correction is zero
  in expectation and the estimate stays unbiased; what the covariates explain of the
  user-to-user spread leaves the interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Float64Array = npt.NDArray[np.float64]


def _check(hits: Float64Array, requests: Float64Array) -> None:
    if hits.shape != requests.shape or hits.ndim != 1 or len(hits) == 0:
        raise ValueError("need equally long, non-empty per-user hits and requests")


def _resampled_rates(
    hits: Float64Array, requests: Float64Array, picks: npt.NDArray[np.int64]
) -> Float64Array:
    """Rate of each resample (rows of `picks`: user positions)."""
    totals: Float64Array = requests[picks].sum(axis=1)
    rates: Float64Array = hits[picks].sum(axis=1) / np.maximum(totals, 1.0)
    return rates


def _interval(ratios: Float64Array, level: float) -> tuple[float, float]:
    tail = (1.0 - level) / 2.0
    finite = ratios[np.isfinite(ratios)]
    if len(finite) == 0:
        return float("nan"), float("nan")
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return float(low), float(high)


def ratio(hits_a: Float64Array, requests_a: Float64Array, hits_b: Float64Array,
          requests_b: Float64Array) -> float:
    """(hits_a / requests_a) / (hits_b / requests_b) over all users; NaN when b has no hit."""
    rate_b = hits_b.sum() / max(requests_b.sum(), 1.0)
    if rate_b == 0:
        return float("nan")
    return float(hits_a.sum() / max(requests_a.sum(), 1.0) / rate_b)


def independent_ratio_ci(
    hits_a: Float64Array, requests_a: Float64Array, hits_b: Float64Array,
    requests_b: Float64Array, n_resamples: int = 2000, level: float = 0.95, seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of rate_a / rate_b, each arm's users resampled separately."""
    _check(hits_a, requests_a)
    _check(hits_b, requests_b)
    rng = np.random.default_rng(seed)
    a = _resampled_rates(hits_a, requests_a, rng.integers(0, len(hits_a), (n_resamples,
                                                                            len(hits_a))))
    b = _resampled_rates(hits_b, requests_b, rng.integers(0, len(hits_b), (n_resamples,
                                                                            len(hits_b))))
    with np.errstate(divide="ignore", invalid="ignore"):
        return _interval(a / b, level)


def paired_ratio_ci(
    hits_a: Float64Array, hits_b: Float64Array, requests: Float64Array,
    n_resamples: int = 2000, level: float = 0.95, seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of rate_a / rate_b when both arms answered the same requests of the
    same users (`requests` per user, shared)."""
    _check(hits_a, requests)
    _check(hits_b, requests)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(requests), (n_resamples, len(requests)))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = hits_a[picks].sum(axis=1) / hits_b[picks].sum(axis=1)
    return _interval(ratios, level)


def rate_ci(
    hits: Float64Array, requests: Float64Array, n_resamples: int = 2000, level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of one arm's rate (its hits over its requests), users resampled."""
    _check(hits, requests)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(hits), (n_resamples, len(hits)))
    return _interval(_resampled_rates(hits, requests, picks), level)


@dataclass(frozen=True)
class ArmUsers:
    """One arm's users: hits, requests and covariate rows (users x covariates)."""

    hits: Float64Array
    requests: Float64Array
    covariates: Float64Array

    def __post_init__(self) -> None:
        _check(self.hits, self.requests)
        if self.covariates.ndim != 2 or len(self.covariates) != len(self.hits):
            raise ValueError("need one covariate row per user")


def cuped_theta(arms: Sequence[ArmUsers]) -> Float64Array:
    """Least-squares coefficients of the arms' linearised rates on their covariates, each
    arm centred on its own means (the arms' difference is not what theta explains)."""
    residuals, rows = [], []
    for arm in arms:
        rate = arm.hits.sum() / max(arm.requests.sum(), 1.0)
        residuals.append((arm.hits - rate * arm.requests) / max(arm.requests.mean(), 1e-12))
        rows.append(arm.covariates - arm.covariates.mean(axis=0))
    theta, *_ = np.linalg.lstsq(np.concatenate(rows), np.concatenate(residuals), rcond=None)
    return np.asarray(theta, dtype=np.float64)


def _adjusted_rates(arm: ArmUsers, picks: npt.NDArray[np.int64], theta: Float64Array,
                    population_mean: Float64Array) -> Float64Array:
    shift = (arm.covariates[picks].mean(axis=1) - population_mean) @ theta
    adjusted: Float64Array = _resampled_rates(arm.hits, arm.requests, picks) - shift
    return adjusted


def adjusted_ratio_ci(
    a: ArmUsers, b: ArmUsers, population_mean: Float64Array, n_resamples: int = 2000,
    level: float = 0.95, seed: int = 0,
) -> tuple[float, float, float]:
    """CUPED ratio of a's rate to b's and its percentile interval, each arm's users resampled
    on their own. `population_mean`: the covariates' mean over every user of the experiment
    (all arms), the point both arms are corrected to."""
    theta = cuped_theta([a, b])
    whole_a = np.arange(len(a.hits))[None, :]
    whole_b = np.arange(len(b.hits))[None, :]
    rng = np.random.default_rng(seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = float((_adjusted_rates(a, whole_a, theta, population_mean)
                       / _adjusted_rates(b, whole_b, theta, population_mean))[0])
        ratios = (
            _adjusted_rates(a, rng.integers(0, len(a.hits), (n_resamples, len(a.hits))), theta,
                            population_mean)
            / _adjusted_rates(b, rng.integers(0, len(b.hits), (n_resamples, len(b.hits))),
                              theta, population_mean)
        )
    low, high = _interval(ratios, level)
    return value, low, high
