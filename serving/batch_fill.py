"""How long a micro-batch waits for companions after its first request.

A batch has a fixed cost (an encoder call, a Redis round trip, an index search), and it runs with
cold caches after every wait, so fewer, larger batches save CPU per request and lower the tail at
high rates. At low rates a window rarely finds a companion and only adds its length to every
request's latency. So the window is used only when the recent arrival rate makes at least
`min_expected` more requests within it likely; otherwise a request never waits for company.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable


class BatchFill:
    def __init__(
        self,
        fill_s: float,
        min_expected: float = 0.5,
        window_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fill_s = fill_s
        self._min_expected = min_expected
        self._window_s = window_s
        self._clock = clock
        self._arrivals: deque[tuple[float, int]] = deque()
        self._count = 0

    def observed(self, requests: int) -> None:
        """A batch of `requests` was polled now."""
        if requests:
            self._arrivals.append((self._clock(), requests))
            self._count += requests

    def rate(self) -> float:
        """Requests per second over the last `window_s`."""
        horizon = self._clock() - self._window_s
        while self._arrivals and self._arrivals[0][0] < horizon:
            self._count -= self._arrivals.popleft()[1]
        return self._count / self._window_s

    def window_s(self) -> float:
        """The fill for the next batch: `fill_s` when companions are likely, else 0."""
        if self._fill_s <= 0:
            return 0.0
        return self._fill_s if self.rate() * self._fill_s >= self._min_expected else 0.0
