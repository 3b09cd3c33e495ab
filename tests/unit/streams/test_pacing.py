from streams.pacing import Pacer


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds + 0.003  # every wake-up is late, as on a busy machine


def test_ticks_send_what_is_due_on_an_absolute_schedule() -> None:
    clock = _Clock()
    pacer = Pacer(1_000.0, clock=clock.perf_counter, sleep=clock.sleep)
    sent = [pacer.wait_due(0.01) for _ in range(50)]
    elapsed = clock.now - 100.0
    # Slot n is due at n / rate: late wake-ups are caught up, never sent ahead of schedule.
    assert sum(sent) <= int(elapsed * 1_000.0) + 1
    assert sum(sent) >= int((elapsed - 0.01) * 1_000.0)
    assert max(sent) <= 0.01 * 1_000.0 + 0.003 * 1_000.0 + 1
