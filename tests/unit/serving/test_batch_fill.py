from serving.batch_fill import BatchFill


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_no_fill_until_companions_are_likely() -> None:
    clock = Clock()
    fill = BatchFill(0.003, min_expected=0.5, clock=clock)
    assert fill.window_s() == 0.0  # nothing seen yet
    for _ in range(100):  # 100 req/s: 0.3 expected within 3 ms
        fill.observed(1)
        clock.now += 0.01
    assert fill.window_s() == 0.0
    for _ in range(200):  # then 200 req/s for a second: 0.6 expected
        fill.observed(1)
        clock.now += 0.005
    assert fill.window_s() == 0.003


def test_the_rate_forgets_arrivals_older_than_its_window() -> None:
    clock = Clock()
    fill = BatchFill(0.003, clock=clock)
    fill.observed(500)
    assert fill.window_s() == 0.003
    clock.now += 1.5
    assert fill.rate() == 0.0 and fill.window_s() == 0.0


def test_a_zero_fill_never_waits_and_zero_expected_always_does() -> None:
    clock = Clock()
    never = BatchFill(0.0, clock=clock)
    never.observed(1000)
    assert never.window_s() == 0.0
    assert BatchFill(0.003, min_expected=0.0, clock=clock).window_s() == 0.003
