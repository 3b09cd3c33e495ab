from __future__ import annotations

from streams.features.windows import HOURS, MINUTES, WINDOW_1H, WINDOW_7D, WINDOW_24H


def test_a_window_is_the_current_bucket_and_the_span_minus_one_before_it() -> None:
    as_of = 3600.0 * 1000 + 30  # 30 s into minute 60,000
    now = MINUTES.bucket(as_of)
    buckets = {str(now): "2", str(now - 59): "3", str(now - 60): "100", str(now + 1): "7"}
    assert WINDOW_1H.count(buckets, as_of) == 5


def test_day_and_week_windows_share_the_hour_buckets() -> None:
    as_of = 3600.0 * 5000
    hour = HOURS.bucket(as_of)
    buckets = {str(hour): "1", str(hour - 23): "2", str(hour - 24): "4", str(hour - 167): "8"}
    assert WINDOW_24H.count(buckets, as_of) == 3
    assert WINDOW_7D.count(buckets, as_of) == 15


def test_buckets_floor_event_time() -> None:
    assert MINUTES.bucket(119.999) == 1
    assert HOURS.bucket(3600.0) == 1
