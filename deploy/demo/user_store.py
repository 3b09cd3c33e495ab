"""Whether the feature store holds a user's event yet: what a user-paced replay waits on.

A replayed user's next request must be answered from a history that holds their previous event,
as a person's next visit would be; a fixed gap after publishing only holds while the pipeline is
faster than the gap, and on a loaded host it is not. The replay asks the store instead: the
user's hash keeps the newest event time it applied (`last_ts`, the event's own time, exactly).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import redis

from streams.features.keys import FeatureKeys
from streams.features.layout import LAST_TS

POLL_S = 0.005
"""How often a held request asks the store again (the worker applies a batch every 50 ms)."""


class UserStore(Protocol):
    def holds(self, user_id: str, timestamp: float) -> bool:
        """True when the user's newest applied event is at `timestamp` or later."""
        ...


class RedisUserStore:
    def __init__(self, client: redis.Redis, key_prefix: str) -> None:
        self._client = client
        self._keys = FeatureKeys(key_prefix)

    def holds(self, user_id: str, timestamp: float) -> bool:
        raw = self._client.hget(self._keys.user(user_id), LAST_TS)
        return raw is not None and float(raw) >= timestamp


def wait_until_held(
    store: UserStore, user_id: str, timestamp: float, timeout_s: float,
    meanwhile: Callable[[], None],
) -> bool:
    """Polls the store until it holds the user's event at `timestamp`, calling `meanwhile`
    between polls (other users' traffic goes on); False when `timeout_s` passed first."""
    deadline = time.monotonic() + timeout_s
    while not store.holds(user_id, timestamp):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
        meanwhile()
    return True
