"""Each user's recent item rows and times: the trainer's point-in-time view of sequences."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]


class UserHistories:
    """The last `max_len` events per user; at most `max_users` users (least recent evicted).

    Memory is bounded by max_users * max_len * 16 bytes. An evicted user restarts as cold, which
    is the same thing a brand-new user gets, so eviction never produces a wrong answer.
    """

    def __init__(self, max_len: int, max_users: int) -> None:
        self.max_len = max_len
        self.max_users = max_users
        self._items: OrderedDict[str, list[int]] = OrderedDict()
        self._times: dict[str, list[int]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def get(self, user: str) -> tuple[IntArray, IntArray]:
        items = self._items.get(user, [])
        return np.asarray(items, dtype=np.int64), np.asarray(
            self._times.get(user, []), dtype=np.int64
        )

    def last_item(self, user: str) -> int:
        items = self._items.get(user)
        return items[-1] if items else 0

    def append(self, user: str, item: int, timestamp: int) -> None:
        items = self._items.get(user)
        if items is None:
            items = self._items[user] = []
            self._times[user] = []
            if len(self._items) > self.max_users:
                evicted, _ = self._items.popitem(last=False)
                del self._times[evicted]
        else:
            self._items.move_to_end(user)
        times = self._times[user]
        items.append(item)
        times.append(timestamp)
        if len(items) > self.max_len:
            del items[0], times[0]

    def to_state(self) -> dict[str, list[list[int]]]:
        return {u: [self._items[u], self._times[u]] for u in self._items}

    @classmethod
    def from_state(
        cls, state: dict[str, list[list[int]]], max_len: int, max_users: int
    ) -> UserHistories:
        histories = cls(max_len, max_users)
        for user, (items, times) in state.items():
            histories._items[user] = list(items)
            histories._times[user] = list(times)
        return histories
