"""Open-loop pacing for load generators: events leave on schedule, not when the last returned."""

from __future__ import annotations

import time
from collections.abc import Callable


class Pacer:
    """Spaces calls to `wait()` at `rate` per second; rate 0 means unpaced.

    The schedule is absolute (start + n / rate), so a slow iteration is caught up afterwards
    instead of lowering the offered rate (coordinated omission would flatter latency figures).
    """

    def __init__(
        self,
        rate: float,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = rate
        self._clock = clock
        self._sleep = sleep
        self._start = clock()
        self._n = 0

    def wait(self) -> float:
        """Sleep until the next slot; returns the slot's scheduled time (perf_counter seconds)."""
        if self.rate <= 0:
            return self._clock()
        due = self._start + self._n / self.rate
        self._n += 1
        delay = due - self._clock()
        if delay > 0:
            self._sleep(delay)
        return due

    def wait_due(self, tick_s: float) -> int:
        """Sleep until the next tick (every `tick_s` on the same absolute schedule), then
        return how many slots are due by now: the caller sends that many at once.

        For generators at thousands of events/s: a wake-up per event costs more CPU than the
        event itself, and on a shared machine that CPU is taken from the system under test.
        Events leave in bursts of at most one tick's worth, as a producer's linger would send
        them anyway."""
        if self.rate <= 0:
            return 1
        elapsed = self._clock() - self._start
        delay = tick_s - elapsed % tick_s
        self._sleep(delay)
        due = int((elapsed + delay) * self.rate) + 1 - self._n
        due = max(0, due)
        self._n += due
        return due
