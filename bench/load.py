"""Interaction events for the load generators, drawn in bulk and written straight to wire JSON.

A generator shares the machine with the system it measures. At 1,000 events/s, one pydantic
model, one uuid4 and one model_dump_json per event kept the generator's main thread at ~0.15 of
a core (bench serve, 2 cores), CPU taken from the scorer whose latency was being measured. Here
the random draws are numpy vectors per burst and each payload is one f-string: the same contract
(tests/unit/bench/test_load.py decodes every field back through InteractionEvent), the same
distributions, a fraction of the CPU.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

CLICK_SHARE = 0.3
ZIPF_EXPONENT = 1.2
"""A popularity skew, as real catalogs have."""


class InteractionDraw:
    """Random users, items and event types. Ids: user `u<n>` (n < users) with one session
    `u<n>-s`, item `i<n>` (n < catalog) in category `c<n % categories>`.

    Draws are made `chunk` at a time: a generator wakes every few ms for a handful of events, and
    a numpy call per wake-up ran on cold caches (~60 us per event at 5 per 5 ms tick, against
    ~10 us when drawn in bulk)."""

    def __init__(
        self,
        rng: np.random.Generator,
        catalog: int,
        users: int,
        categories: int,
        chunk: int = 8192,
    ) -> None:
        self._rng = rng
        self._catalog = catalog
        self._users = users
        self._categories = categories
        self._chunk = chunk
        self._drawn: list[tuple[int, int, bool, str]] = []

    def _refill(self) -> None:
        rng, n = self._rng, self._chunk
        users = rng.integers(self._users, size=n)
        items = np.minimum(rng.zipf(ZIPF_EXPONENT, size=n), self._catalog) - 1
        items = (items * 7919 + users % 13) % self._catalog  # spread popular items over the index
        clicks = rng.random(n) < CLICK_SHARE
        ids = os.urandom(16 * n).hex()  # 32 hex digits per event, as uuid4().hex
        fresh = zip(
            users.tolist(), items.tolist(), clicks.tolist(), range(0, 32 * n, 32), strict=True
        )
        # Reversed: payloads() pops from the end.
        self._drawn = [(u, i, c, ids[at : at + 32]) for u, i, c, at in fresh][::-1]

    def payloads(self, timestamps: Sequence[float]) -> list[tuple[str, bytes]]:
        """One (key, JSON value) per timestamp; the key is the user id (the contract's key)."""
        out = []
        for ts in timestamps:
            if not self._drawn:
                self._refill()
            user, item, click, event_id = self._drawn.pop()
            kind = "click" if click else "view"
            value = (
                f'{{"event_id":"{event_id}","user_id":"u{user}","session_id":"u{user}-s",'
                f'"item_id":"i{item}","event_type":"{kind}","timestamp":{float(ts)!r},'
                f'"context":{{"category":"c{item % self._categories}"}}}}'
            )
            out.append((f"u{user}", value.encode()))
        return out
