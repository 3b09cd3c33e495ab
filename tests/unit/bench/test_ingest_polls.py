from bench.ingest import POLL_MAX_S, POLL_MIN_S, poll_pause_s


def test_a_drain_not_yet_started_is_polled_at_the_shortest_pause() -> None:
    assert poll_pause_s(remaining=1000, done=0, elapsed_s=0) == POLL_MIN_S


def test_the_pause_is_half_the_time_the_rest_should_take() -> None:
    # 10,000 records in 1 s: 2,000 left should take 0.2 s, so wait 0.1 s.
    assert poll_pause_s(remaining=2000, done=10_000, elapsed_s=1.0) == 0.1


def test_the_pause_stays_within_its_bounds() -> None:
    assert poll_pause_s(remaining=1_000_000, done=100, elapsed_s=1.0) == POLL_MAX_S
    assert poll_pause_s(remaining=10, done=10_000, elapsed_s=1.0) == POLL_MIN_S
    assert poll_pause_s(remaining=0, done=10_000, elapsed_s=1.0) == POLL_MIN_S
