"""Non-neural baselines reported beside every model (docs/architecture.md).

Each has ``fit(train)`` on chronological training sequences, then ``score(queries)`` returns a
dense ``[n_queries, n_items + 1]`` float32 matrix (column 0 is padding);
:class:`models.lab.evaluation.TunedBaseline` wraps them for evaluation. Every baseline adds a tiny
global-popularity term so that items it has no evidence for are ordered by popularity rather
than tied (ranks are pessimistic about ties, see :mod:`models.metrics`).

- :class:`Popularity`: interaction counts over the whole training window.
- :class:`RecentPopularity`: counts over a sliding window ending at each query's request time
  (only training events strictly before the request are counted).
- :class:`ItemKNN`: cosine similarity of item co-occurrence (users as the shared context),
  summed over the user's history, each history item weighted ``recency_decay ** age`` (1.0 is
  plain item-kNN; evaluation tunes the decay on validation, which makes this baseline much
  stronger and sequence-aware); computed as ``H D^-1/2 X^T X D^-1/2`` with sparse products
  so no item x item matrix is materialised.
- :class:`Markov`: first-order item -> next-item transition probabilities from consecutive
  training events, queried with the user's last item.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

from models.sequences import Queries, UserSequences

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]
_TIE_BREAK = 1e-6  # small enough never to reorder items with real evidence


def _popularity(train: UserSequences) -> FloatArray:
    counts = np.zeros(train.n_items + 1, dtype=np.float64)
    for items in train.items:
        np.add.at(counts, items, 1.0)
    return counts.astype(np.float32)


def _tie_breaker(popularity: FloatArray) -> FloatArray:
    top = float(popularity.max()) or 1.0
    return (_TIE_BREAK * popularity / top).astype(np.float32)


class Popularity:
    """Most-interacted items in the training window."""

    name = "popularity"

    def __init__(self) -> None:
        self._counts: FloatArray = np.zeros(1, dtype=np.float32)

    def fit(self, train: UserSequences) -> None:
        self._counts = _popularity(train)

    def score(self, queries: Queries) -> FloatArray:
        return np.tile(self._counts, (len(queries.targets), 1))


class RecentPopularity:
    """Counts of training events in ``[t - window_s, t)`` for each request time ``t``."""

    name = "recent_popularity"

    def __init__(self, window_s: int = 7 * 86_400) -> None:
        self.window_s = window_s
        self._items: IntArray = np.zeros(0, dtype=np.int64)
        self._times: IntArray = np.zeros(0, dtype=np.int64)
        self._tie: FloatArray = np.zeros(1, dtype=np.float32)
        self._n_columns = 1

    def fit(self, train: UserSequences) -> None:
        items = np.concatenate(train.items) if train.items else np.zeros(0, np.int64)
        times = np.concatenate(train.times) if train.times else np.zeros(0, np.int64)
        order = np.argsort(times, kind="stable")
        self._items, self._times = items[order], times[order]
        self._tie = _tie_breaker(_popularity(train))
        self._n_columns = train.n_items + 1

    def score(self, queries: Queries) -> FloatArray:
        # Queries visited in time order with an incrementally maintained window: O(events).
        out = np.empty((len(queries.targets), self._n_columns), dtype=np.float32)
        counts = np.zeros(self._n_columns, dtype=np.float32)
        lo = hi = 0
        for q in np.argsort(queries.query_times, kind="stable"):
            t = int(queries.query_times[q])
            new_hi = int(np.searchsorted(self._times, t, side="left"))
            new_lo = int(np.searchsorted(self._times, t - self.window_s, side="left"))
            np.add.at(counts, self._items[hi:new_hi], 1.0)
            np.add.at(counts, self._items[lo:new_lo], -1.0)
            lo, hi = new_lo, new_hi
            out[q] = counts + self._tie
        return out


class ItemKNN:
    """Item-to-item cosine similarity over co-occurrence, summed over the history."""

    name = "item_knn"

    def __init__(self, recency_decay: float = 1.0, batch_size: int = 1024) -> None:
        self.recency_decay = recency_decay
        self.batch_size = batch_size
        self._x = torch.zeros(0)
        self._inv_sqrt = np.zeros(1, dtype=np.float32)
        self._tie = np.zeros(1, dtype=np.float32)

    def fit(self, train: UserSequences) -> None:
        rows = np.concatenate([np.full(len(s), u) for u, s in enumerate(train.items)])
        cols = np.concatenate(train.items)
        pairs = np.unique(np.stack([rows, cols]), axis=1)  # binary user x item matrix
        values = torch.ones(pairs.shape[1], dtype=torch.float32)
        shape = (len(train.items), train.n_items + 1)
        self._x = torch.sparse_coo_tensor(
            torch.from_numpy(pairs), values, shape, check_invariants=True
        ).coalesce()
        degree = np.bincount(pairs[1], minlength=train.n_items + 1).astype(np.float32)
        self._inv_sqrt = np.where(degree > 0, 1.0 / np.sqrt(np.maximum(degree, 1.0)), 0.0)
        self._inv_sqrt = self._inv_sqrt.astype(np.float32)
        self._tie = _tie_breaker(_popularity(train))

    def _history_weights(self, histories: list[IntArray], n_columns: int) -> FloatArray:
        weights = np.zeros((len(histories), n_columns), dtype=np.float32)
        for row, items in enumerate(histories):
            age = np.arange(len(items) - 1, -1, -1, dtype=np.float64)
            np.maximum.at(weights[row], items, (self.recency_decay**age).astype(np.float32))
        return weights

    def score(self, queries: Queries) -> FloatArray:
        n_columns = len(self._inv_sqrt)
        out = np.empty((len(queries.targets), n_columns), dtype=np.float32)
        for start in range(0, len(queries.targets), self.batch_size):
            chunk = queries.histories[start : start + self.batch_size]
            weights = self._history_weights(chunk, n_columns)
            h_t = torch.from_numpy(weights * self._inv_sqrt)
            users = torch.sparse.mm(self._x, h_t.T)  # [users, batch]
            sims = torch.sparse.mm(self._x.t(), users).T.numpy() * self._inv_sqrt
            sims -= weights * (self._inv_sqrt > 0)  # cos(i, i) = 1: no self-similarity
            out[start : start + len(chunk)] = sims + self._tie
        return out


class Markov:
    """First-order transitions ``P(next = j | last = i)`` with popularity back-off."""

    name = "markov"

    def __init__(self, smoothing: float = 0.0) -> None:
        self.smoothing = smoothing
        self._indptr: IntArray = np.zeros(1, dtype=np.int64)
        self._next: IntArray = np.zeros(0, dtype=np.int64)
        self._counts: FloatArray = np.zeros(0, dtype=np.float32)
        self._tie: FloatArray = np.zeros(1, dtype=np.float32)

    def fit(self, train: UserSequences) -> None:
        n = train.n_items + 1
        src = np.concatenate([s[:-1] for s in train.items])
        dst = np.concatenate([s[1:] for s in train.items])
        keys, counts = np.unique(src * n + dst, return_counts=True)  # CSR, sorted by source
        self._next = keys % n
        self._counts = counts.astype(np.float32)
        self._indptr = np.searchsorted(keys // n, np.arange(n + 1)).astype(np.int64)
        self._tie = _tie_breaker(_popularity(train))

    def score(self, queries: Queries) -> FloatArray:
        out = np.tile(self._tie, (len(queries.targets), 1))
        for row, history in enumerate(queries.histories):
            if len(history) == 0:
                continue
            last = int(history[-1])
            lo, hi = self._indptr[last], self._indptr[last + 1]
            counts = self._counts[lo:hi]
            total = float(counts.sum()) + self.smoothing
            if total > 0:
                out[row, self._next[lo:hi]] += counts / total
        return out
