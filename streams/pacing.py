"""Open-loop pacing for load generators: events leave on schedule, not when the last returned."""

from __future__ import annotations

import time


class Pacer:
    """Spaces calls to `wait()` at `rate` per second; rate 0 means unpaced.

    The schedule is absolute (start + n / rate), so a slow iteration is caught up afterwards
    instead of lowering the offered rate (coordinated omission would flatter latency figures).
    """

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._start = time.perf_counter()
        self._n = 0

    def wait(self) -> float:
        """Sleep until the next slot; returns the slot's scheduled time (perf_counter seconds)."""
        if self.rate <= 0:
            return time.perf_counter()
        due = self._start + self._n / self.rate
        self._n += 1
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        return due
