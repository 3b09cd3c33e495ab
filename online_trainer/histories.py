"""Each user's recent item rows and times: the trainer's point-in-time view of sequences."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from itertools import chain

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]


class UserHistories:
    """The last `max_len` events per user; at most `max_users` users (least recent evicted).

    Memory is bounded by max_users * max_len * 24 bytes. An evicted user restarts as cold, which
    is the same thing a brand-new user gets, so eviction never produces a wrong answer.

    A row the vocabulary recycles (see online_trainer/vocabulary.py) means another item from then
    on: `forget_rows` bumps the row's generation, and entries appended under an older generation
    are left out of every read, so no history ever presents the evicted item as the new one.
    Finding them lazily costs nothing per recycle, where scrubbing every history would not.
    """

    def __init__(self, max_len: int, max_users: int) -> None:
        self.max_len = max_len
        self.max_users = max_users
        self._items: OrderedDict[str, list[int]] = OrderedDict()
        self._times: dict[str, list[int]] = {}
        self._generations: dict[str, list[int]] = {}
        self._row_generation: dict[int, int] = {}
        """Rows ever recycled -> their current generation (absent: 0)."""

    def __len__(self) -> int:
        return len(self._items)

    def forget_rows(self, rows: Iterable[int]) -> None:
        for row in rows:
            self._row_generation[row] = self._row_generation.get(row, 0) + 1

    def _current(self, user: str) -> tuple[list[int], list[int]]:
        items = self._items.get(user, [])
        times = self._times.get(user, [])
        if not self._row_generation or not items:
            return items, times
        gens = self._generations[user]
        live = [k for k, (r, g) in enumerate(zip(items, gens, strict=True)) if self._gen(r) == g]
        if len(live) == len(items):
            return items, times
        return [items[k] for k in live], [times[k] for k in live]

    def _gen(self, row: int) -> int:
        return self._row_generation.get(row, 0)

    def get(self, user: str) -> tuple[IntArray, IntArray]:
        items, times = self._current(user)
        return np.asarray(items, dtype=np.int64), np.asarray(times, dtype=np.int64)

    def last_item(self, user: str) -> int:
        items = self._items.get(user)
        if not items:
            return 0
        if self._gen(items[-1]) != self._generations[user][-1]:
            return 0  # the row was recycled since: that event was another item
        return items[-1]

    def append(self, user: str, item: int, timestamp: int) -> None:
        items = self._items.get(user)
        if items is None:
            items = self._items[user] = []
            self._times[user] = []
            self._generations[user] = []
            if len(self._items) > self.max_users:
                evicted, _ = self._items.popitem(last=False)
                del self._times[evicted], self._generations[evicted]
        else:
            self._items.move_to_end(user)
        times, gens = self._times[user], self._generations[user]
        items.append(item)
        times.append(timestamp)
        gens.append(self._gen(item))
        if len(items) > self.max_len:
            del items[0], times[0], gens[0]

    def copy(self) -> UserHistories:
        """An independent copy: one list copy per user, not an object walk of every entry."""
        twin = UserHistories(self.max_len, self.max_users)
        twin._items = OrderedDict((u, items.copy()) for u, items in self._items.items())
        twin._times = {u: times.copy() for u, times in self._times.items()}
        twin._generations = {u: gens.copy() for u, gens in self._generations.items()}
        twin._row_generation = dict(self._row_generation)
        return twin

    def to_arrays(self) -> tuple[list[str], dict[str, IntArray]]:
        """The users, least recent first, and their entries as flat arrays (`lengths` per user,
        then `items`, `times` and `generations` back to back): a checkpoint stores them as
        tensors, since a JSON number per entry cost most of a checkpoint's time."""
        users = list(self._items)
        lengths = np.fromiter((len(self._items[u]) for u in users), np.int64, len(users))
        total = int(lengths.sum())

        def flat(columns: dict[str, list[int]]) -> IntArray:
            return np.fromiter(chain.from_iterable(columns[u] for u in users), np.int64, total)

        return users, {
            "lengths": lengths,
            "items": flat(self._items),
            "times": flat(self._times),
            "generations": flat(self._generations),
        }

    def row_generations(self) -> dict[int, int]:
        return dict(self._row_generation)

    @classmethod
    def from_arrays(
        cls,
        users: list[str],
        arrays: dict[str, IntArray],
        row_generations: dict[int, int],
        max_len: int,
        max_users: int,
    ) -> UserHistories:
        """What `to_arrays` and `row_generations` gave."""
        histories = cls(max_len, max_users)
        histories._row_generation = dict(row_generations)
        ends = np.cumsum(arrays["lengths"]).tolist()
        items, times = arrays["items"].tolist(), arrays["times"].tolist()
        generations = arrays["generations"].tolist()
        start = 0
        for user, end in zip(users, ends, strict=True):
            histories._items[user] = items[start:end]
            histories._times[user] = times[start:end]
            histories._generations[user] = generations[start:end]
            start = end
        return histories

    @classmethod
    def from_state(cls, state: dict[str, object], max_len: int, max_users: int) -> UserHistories:
        """The histories of a checkpoint that kept them as JSON lists (before `to_arrays`)."""
        histories = cls(max_len, max_users)
        current = isinstance(state.get("users"), dict)  # older checkpoints: user -> [items, times]
        users = state["users"] if current else state
        generations = state.get("row_generations", {}) if current else {}
        assert isinstance(users, dict) and isinstance(generations, dict)
        histories._row_generation = {int(r): int(g) for r, g in generations.items()}
        for user, lists in users.items():
            items, times = list(lists[0]), list(lists[1])
            histories._items[user] = items
            histories._times[user] = times
            histories._generations[user] = list(lists[2]) if len(lists) > 2 else [0] * len(items)
        return histories
