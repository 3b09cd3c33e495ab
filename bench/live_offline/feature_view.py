"""What the feature store holds after a prefix of the stream, as the scorer reads it.

The same definitions as the feature worker's: each user's newest `SEQUENCE_LENGTH` events
(the history the scorer encodes and the items it filters as seen), popularity counted per
`popularity_bucket_s` bucket of event time with the scorer's merge (newest bucket plus half of
the previous one, serving.features.merge_popularity), and each item's first and last
interaction time and event count (the ranking stage's item state).

No session sequences: where a request names a session (bench live), it is one of the live
phase's own sessions (deploy.demo.traffic.live_event), whose sequence is the newest part of its
user's, so the user sequence alone holds every item the scorer reads as seen.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from serving.features import Interaction, StateArrays, UserContext, merge_popularity
from streams.features.definitions import SEQUENCE_LENGTH

_KIND = "click"
"""Replayed datasets hold one kind of interaction (frame_events sends clicks)."""


class FeatureView:
    def __init__(self, popularity_bucket_s: float, popularity_size: int = 1000) -> None:
        self.bucket_s = popularity_bucket_s
        self.popularity_size = popularity_size
        self._users: dict[str, deque[Interaction]] = {}
        self._buckets: dict[int, dict[str, int]] = {}
        self._newest: int | None = None
        self._first: dict[str, float] = {}
        self._last: dict[str, float] = {}
        self._count: dict[str, int] = {}
        self._popular: list[tuple[str, float]] | None = None
        self._seen: dict[str, dict[str, None]] = {}

    def apply(self, user: str, item: str, ts: float) -> None:
        events = self._users.get(user)
        if events is None:
            events = self._users[user] = deque(maxlen=SEQUENCE_LENGTH)
        events.append(Interaction(item, ts, _KIND))
        self._seen.setdefault(user, {})[item] = None
        bucket = math.floor(ts / self.bucket_s)
        counts = self._buckets.setdefault(bucket, {})
        counts[item] = counts.get(item, 0) + 1
        self._newest = bucket if self._newest is None else max(self._newest, bucket)
        self._first[item] = min(self._first.get(item, ts), ts)
        self._last[item] = max(self._last.get(item, ts), ts)
        self._count[item] = self._count.get(item, 0) + 1
        self._popular = None

    def context(self, user: str) -> UserContext:
        events = tuple(self._users.get(user, ()))
        return UserContext(user, None, events, (), last_event_ts=events[-1].ts if events else None)

    def older_items(self, user: str, limit: int) -> list[str]:
        """The newest `limit` items the user interacted with that the store's sequence no
        longer holds (what a seen filter over the whole history would add)."""
        recent = {e.item_id for e in self._users.get(user, ())}
        older = [i for i in self._seen.get(user, {}) if i not in recent]
        return older[-limit:]

    def popular(self) -> list[tuple[str, float]]:
        """The scorer's recent-popularity list now (its cold-start answer before filtering)."""
        if self._popular is None:
            if self._newest is None:
                self._popular = []
            else:
                current = list(self._buckets.get(self._newest, {}).items())
                previous = list(self._buckets.get(self._newest - 1, {}).items())
                self._popular = merge_popularity(current, previous, self.popularity_size)
        return self._popular

    def item_states(self) -> ItemStates:
        """The items' states now, unchanged by later `apply` calls."""
        return ItemStates(dict(self._first), dict(self._last), dict(self._count))


@dataclass(frozen=True)
class ItemStates:
    """The ranking stage's item state of every item as of one moment."""

    first: dict[str, float]
    last: dict[str, float]
    count: dict[str, int]

    def __call__(self, item_ids: Sequence[str]) -> StateArrays:
        return (
            np.array([self.first.get(i, math.nan) for i in item_ids], dtype=np.float64),
            np.array([self.last.get(i, math.nan) for i in item_ids], dtype=np.float64),
            np.array([self.count.get(i, 0) for i in item_ids], dtype=np.float64),
        )
