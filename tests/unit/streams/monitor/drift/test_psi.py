import math

import pytest

from streams.monitor.drift.psi import population_stability_index, proportions


def test_identical_distributions_have_zero_psi() -> None:
    assert population_stability_index([10, 20, 70], [1, 2, 7]) == pytest.approx(0.0, abs=1e-12)


def test_psi_matches_the_textbook_formula() -> None:
    expected = (0.9 - 0.5) * math.log(0.9 / 0.5) + (0.1 - 0.5) * math.log(0.1 / 0.5)
    assert population_stability_index([50, 50], [90, 10]) == pytest.approx(expected)


def test_a_bin_empty_on_one_side_gives_a_large_but_finite_psi() -> None:
    value = population_stability_index([100, 0], [50, 50])
    assert math.isfinite(value)
    assert value > 1.0


def test_larger_shifts_give_larger_psi() -> None:
    reference = [25, 25, 25, 25]
    small = population_stability_index(reference, [28, 24, 24, 24])
    large = population_stability_index(reference, [55, 15, 15, 15])
    assert 0.0 < small < 0.1 < large


def test_histograms_over_different_bins_are_rejected() -> None:
    with pytest.raises(ValueError, match="bin counts differ"):
        population_stability_index([1, 2], [1, 2, 3])


def test_an_empty_histogram_is_rejected() -> None:
    with pytest.raises(ValueError, match="at least one observation"):
        proportions([0, 0])


def test_negative_counts_are_rejected() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        proportions([3, -1])
