"""Every catalog item's state, in memory, for the ranking stage; kept current in the background.

The ranking stage describes each request's candidates (a hundred by default) by their item state
(first and last interaction time, event count: serving.features.StateArrays). Reading those per
batch would put a second Redis round trip on the request path, a large one, queued behind the
feature worker's scripts. So the scorer keeps the state of every item its model versions know
in this table: a version's items are loaded before it serves (`load`), and a background thread
re-reads the items Redis reports written (serving/item_changes.py) every `interval_s`
(`follow`), so a request only looks states up. A state is at most about one interval old.
Whenever a write may have gone unseen (at start, after a lost connection) the thread reads every
item again, a chunk at a time at `reads_per_s`.

Cheap to keep current, because the background thread shares the scorer's CPU and interpreter
lock with the request thread: it reads only what changed, and the states live in three float
arrays indexed through one dict, not as an object per item (a table of objects replaced
continuously keeps the garbage collector walking them, pauses measured in the request p99).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from redis.exceptions import RedisError

from serving.features import StateArrays

logger = logging.getLogger(__name__)

Float64Array = npt.NDArray[np.float64]
ReadStates = Callable[[Sequence[str]], StateArrays]
"""Reads the current state of the given items from Redis."""
CHUNK = 5000
"""Items per read: one round trip each."""
RETRY_S = 1.0
"""Wait after a failed read before the next try."""
Changes = Callable[[], set[str] | None]
"""Items written since the last call; None when a write may have gone unseen (ItemChanges)."""


class _View(NamedTuple):
    ids: list[str]
    """Row r holds ids[r]; rows are only ever appended."""
    rows: dict[str, int]
    first: Float64Array
    last: Float64Array
    events: Float64Array


class ItemStateTable:
    def __init__(self, reads_per_s: float, chunk: int = CHUNK) -> None:
        self._view = _View([], {}, np.empty(0), np.empty(0), np.empty(0))
        self._reads_per_s = reads_per_s
        self._chunk = chunk
        self._lock = threading.Lock()
        """Serialises writers (a load and the refresh); lookups read without it."""

    def __len__(self) -> int:
        return len(self._view.ids)

    def states(self, item_ids: Sequence[str]) -> StateArrays:
        """The states of `item_ids`, in their order; an item not loaded yet has none (NaN
        times, no events)."""
        view = self._view
        get = view.rows.get
        rows = np.fromiter((get(i, -1) for i in item_ids), dtype=np.int64, count=len(item_ids))
        known = rows >= 0
        if not view.ids:
            return (np.full(len(rows), np.nan), np.full(len(rows), np.nan),
                    np.zeros(len(rows)))
        at = np.where(known, rows, 0)
        return (np.where(known, view.first[at], np.nan), np.where(known, view.last[at], np.nan),
                np.where(known, view.events[at], 0.0))

    def load(self, read: ReadStates, item_ids: Sequence[str]) -> None:
        """Reads the states of `item_ids` now, at full speed (a version's items before it
        serves, the items reported written); items the table did not hold yet join it."""
        with self._lock:
            view = self._view
            new = [i for i in dict.fromkeys(item_ids) if i not in view.rows]
            if new:
                start = len(view.ids)
                pad = np.full(len(new), np.nan)
                view = _View(
                    view.ids + new,
                    {**view.rows, **{i: start + k for k, i in enumerate(new)}},
                    np.concatenate([view.first, pad]), np.concatenate([view.last, pad]),
                    np.concatenate([view.events, np.zeros(len(new))]),
                )
            for start in range(0, len(item_ids), self._chunk):
                chunk = item_ids[start : start + self._chunk]
                rows = [view.rows[i] for i in chunk]
                view.first[rows], view.last[rows], view.events[rows] = read(chunk)
            self._view = view

    def follow(self, read: ReadStates, changes: Changes, stop: threading.Event,
               interval_s: float) -> None:
        """Every `interval_s` until `stop` is set, re-reads the items `changes` reports, or
        every item when it cannot tell, or fails to (Redis down, or refusing change tracking:
        then the table is kept current by sweeps alone). A failed read is logged, and what it
        was to read is read on the next try."""
        pending: set[str] | None = set()
        while not stop.is_set():
            try:
                changed = self._changed(changes)
                pending = None if changed is None or pending is None else pending | changed
                if pending is None:
                    self._sweep(read, stop)
                else:
                    rows = self._view.rows
                    self.load(read, [i for i in pending if i in rows])
                pending = set()
            except RedisError as error:
                # Redis's own words; never key contents.
                logger.warning("item state refresh failed error=%s detail=%s",
                               type(error).__name__, error)
                stop.wait(RETRY_S)
            stop.wait(interval_s)

    @staticmethod
    def _changed(changes: Changes) -> set[str] | None:
        """What `changes` reports; None (read everything) when it cannot say."""
        try:
            return changes()
        except RedisError as error:
            # Redis's own words (say, an ACL or a proxy refusing CLIENT TRACKING).
            logger.warning("item changes unknown error=%s detail=%s",
                           type(error).__name__, error)
            return None

    def _sweep(self, read: ReadStates, stop: threading.Event) -> None:
        """Re-reads every item, a chunk at a time at `reads_per_s` (so a sweep of the whole
        catalog never holds Redis or the scorer's CPU for long)."""
        ids = self._view.ids
        pause = self._chunk / self._reads_per_s
        for start in range(0, len(ids), self._chunk):
            began = time.monotonic()
            end = min(start + self._chunk, len(ids))
            first, last, events = read(ids[start:end])
            with self._lock:
                view = self._view  # a load may have grown it: rows stay where they were
                view.first[start:end], view.last[start:end] = first, last
                view.events[start:end] = events
            if stop.wait(max(0.0, pause - (time.monotonic() - began))):
                return
