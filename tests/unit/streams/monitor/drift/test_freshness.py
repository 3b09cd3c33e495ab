import pytest

from streams.monitor.drift.freshness import HysteresisGuard, SampleQuantile


def test_raises_only_after_consecutive_values_above_high() -> None:
    guard = HysteresisGuard(high=60, low=30, consecutive=2)
    assert guard.update(90) is None
    assert guard.update(10) is None  # the run of highs is broken
    assert guard.update(90) is None
    assert guard.update(90) == "raised"
    assert guard.raised


def test_values_between_low_and_high_neither_raise_nor_clear() -> None:
    guard = HysteresisGuard(high=60, low=30)
    assert guard.update(61) == "raised"
    assert [guard.update(v) for v in (59, 31, 45, 61)] == [None, None, None, None]
    assert guard.update(29) == "cleared"
    assert [guard.update(v) for v in (59, 31)] == [None, None]


def test_inverted_thresholds_are_refused() -> None:
    with pytest.raises(ValueError, match="low must be"):
        HysteresisGuard(high=10, low=20)


def test_sample_quantile_reports_once_per_full_sample() -> None:
    sample = SampleQuantile(size=20, q=0.95)
    results = [sample.add(float(v)) for v in range(1, 21)]
    assert results[:-1] == [None] * 19
    assert results[-1] == 19.0
    assert sample.add(100.0) is None  # a new sample started
