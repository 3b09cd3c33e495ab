import random

from streams.monitor.drift.config import DriftSettings
from streams.monitor.drift.detectors import KpiDrop, KpiDropDetector, change_point


def feed(detector: KpiDropDetector, rates: list[tuple[int, float]], seed: int) -> list[KpiDrop]:
    rng = random.Random(seed)
    drops, t = [], 0.0
    for count, p in rates:
        for _ in range(count):
            drop = detector.update(1.0 if rng.random() < p else 0.0, t)
            if drop is not None:
                drops.append(drop)
            t += 1.0
    return drops


def test_an_abrupt_hit_rate_drop_is_detected_and_dated() -> None:
    drops = feed(KpiDropDetector("hit_rate", DriftSettings()), [(20_000, 0.30), (5_000, 0.15)], 3)
    assert drops, "the drop went unnoticed"
    first = drops[0]
    assert 20_000 <= first.detected_at < 22_000
    assert abs(first.started_at - 20_000) < 500
    assert abs(first.baseline - 0.30) < 0.03
    assert abs(first.current - 0.15) < 0.05
    assert first.relative_drop > 0.3


def test_a_rise_is_not_reported_as_a_drop() -> None:
    detector = KpiDropDetector("hit_rate", DriftSettings())
    drops = feed(detector, [(20_000, 0.15), (5_000, 0.30)], 4)
    assert detector.cuts > 0  # ADWIN did see the change
    assert drops == []


def test_a_stationary_stream_raises_nothing() -> None:
    assert feed(KpiDropDetector("hit_rate", DriftSettings()), [(60_000, 0.30)], 5) == []


def test_drops_below_the_practical_threshold_are_ignored() -> None:
    settings = DriftSettings(min_relative_drop=0.6, critical_relative_drop=0.7)
    drops = feed(KpiDropDetector("hit_rate", settings), [(20_000, 0.30), (5_000, 0.15)], 3)
    assert drops == []


def test_change_point_finds_the_step() -> None:
    values = [1.0] * 300 + [0.0] * 100
    assert change_point(values) == 300


def test_change_point_of_a_tiny_series_is_its_middle() -> None:
    assert change_point([1.0, 0.0, 1.0]) == 1
