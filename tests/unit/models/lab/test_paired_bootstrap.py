"""Paired bootstrap: a clear gain excludes zero, no difference includes it."""

from __future__ import annotations

import numpy as np
import pytest

from models.lab.paired_bootstrap import paired_bootstrap_ci


def _baseline(n: int = 900) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.choice([0.0, 0.0, 0.0, 0.39, 0.5, 1.0], size=n)


def test_a_clearly_better_model_gets_an_interval_above_zero() -> None:
    base = _baseline()
    better = base.copy()
    better[::4] = np.minimum(better[::4] + 0.3, 1.0)  # a quarter of the queries improve
    low, high = paired_bootstrap_ci(better, base)
    assert 0.0 < low < high


def test_an_identical_model_gets_an_interval_containing_zero() -> None:
    base = _baseline()
    assert paired_bootstrap_ci(base.copy(), base) == (0.0, 0.0)


def test_gains_and_losses_that_cancel_include_zero() -> None:
    base = _baseline()
    other = base.copy()
    other[0::10] += 0.2
    other[1::10] -= 0.2  # as many queries lose as gain, by as much
    low, high = paired_bootstrap_ci(other, base)
    assert low < 0.0 < high


def test_unpaired_inputs_are_rejected() -> None:
    with pytest.raises(ValueError):
        paired_bootstrap_ci(np.zeros(3), np.zeros(4))
