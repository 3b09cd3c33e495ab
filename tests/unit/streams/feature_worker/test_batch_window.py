from streams.feature_worker.batch_window import consume_timeout, next_batch_wait
from streams.feature_worker.settings import StreamSettings

SETTINGS = StreamSettings(
    batch_within_s=0.02, busy_batch_within_s=0.05, busy_events_per_s=2000.0
)


def test_a_quiet_stream_keeps_the_short_wait() -> None:
    # 80 events/s: two records in a 20 ms window.
    assert next_batch_wait(SETTINGS, 2, 0.02) == 0.02


def test_a_stream_at_the_busy_rate_gets_the_long_wait() -> None:
    # 5,000 events/s: 100 records in 20 ms, 250 in 50 ms.
    assert next_batch_wait(SETTINGS, 100, 0.02) == 0.05
    assert next_batch_wait(SETTINGS, 250, 0.05) == 0.05


def test_the_long_wait_ends_when_the_rate_falls_below_the_busy_rate() -> None:
    # 1,000 events/s through a 50 ms window.
    assert next_batch_wait(SETTINGS, 50, 0.05) == 0.02


def test_a_backlog_returned_at_once_counts_as_busy() -> None:
    assert next_batch_wait(SETTINGS, 2000, 0.0) == 0.05


def test_an_empty_consume_is_quiet_however_short() -> None:
    assert next_batch_wait(SETTINGS, 0, 0.0) == 0.02


def test_the_rate_counts_the_time_spent_applying_the_previous_batch() -> None:
    # 100 records that arrived over 30 ms of applying plus 20 ms of waiting: 2,000 events/s.
    assert next_batch_wait(SETTINGS, 100, 0.05) == 0.05
    assert next_batch_wait(SETTINGS, 99, 0.05) == 0.02


def test_the_consume_waits_only_what_is_left_of_the_window() -> None:
    assert consume_timeout(0.05, 0.0) == 0.05
    assert consume_timeout(0.05, 0.03) == 0.05 - 0.03


def test_a_batch_applied_slower_than_the_window_is_followed_by_no_wait() -> None:
    assert consume_timeout(0.05, 0.08) == 0.0
