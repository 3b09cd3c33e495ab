"""Point-in-time ranking features of (user, candidate item, request time).

Every feature of a candidate at request time ``t`` is computed from what was known strictly
before ``t``: item activity reads only events with a timestamp ``< t`` from the
:class:`InteractionLog` (whoever produced them), and user features read the query's own history
(the events that precede the request in the user's sequence). Adding events at or after ``t``
never changes a feature, so a model trained on these rows sees what a server would have seen.

The activity windows are the stream's own (:data:`streams.features.windows.WINDOWS`): a
window's count at ``t`` covers the events from :meth:`Window.start_s` up to ``t``, the same
buckets the feature worker sums in Redis, read over raw event times instead of bucket hashes.

Feature groups (names in :data:`FEATURE_NAMES`, one column each, all finite):

- retriever: its score, log-softmax over the query's candidates, log rank;
- similarity: cosine of the candidate's retriever item vector with the user's last item, the
  mean and max over the last :data:`RECENT_ITEMS` items, and with the query vector;
- content: genre cosine with the recent items' and the whole history's genre profile, absolute
  release-year gap to the recent items;
- item activity: log seconds since anyone last interacted with the item and since its first
  interaction, log counts in each stream window and overall, share of the last 7 days' events;
- user: log history length, log seconds since the user's previous event.

The serving feature set (:data:`SERVING_FEATURE_NAMES`, version :data:`SERVING_FEATURE_SET`) is
the retriever, similarity and user groups, what the scorer holds at request time (the ANN scores,
the model's item and query vectors, the history it encoded), the content group, from the item
metadata the scorer keeps from `catalog.items`, and the item state features: time since the
item's last and first interaction and its event count, which the stream keeps in each item's
hash (first and last time, one counter per event type) and the scorer reads per candidate. The
scorer (serving.feature_log) and this module call the same group functions
(:func:`retriever_features`, :func:`similarity_features`, :func:`content_features`,
:func:`item_state_features`, :func:`user_features`), so a vector logged at serving time and one
computed here for the same point in time are one definition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from models.item_content import ItemContent
from models.sequences import LeaveOneOutSplit, Queries
from streams.features.windows import WINDOW_7D, WINDOWS, Window

FloatArray = npt.NDArray[np.float32]
Float64Array = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
RECENT_ITEMS = 5
"""Last history items the similarity features compare a candidate with."""
PROFILE_ITEMS = 10
"""Last history items the recent genre profile and year are averaged over."""
NEVER_S = 1e9
"""Stand-in age (about 32 years) for an item nobody has interacted with yet."""

FEATURE_NAMES: tuple[str, ...] = (
    "retriever_score", "retriever_log_softmax", "retriever_log_rank",
    "sim_last", "sim_recent_mean", "sim_recent_max", "sim_query",
    "genre_match_recent", "genre_match_history", "year_gap_recent",
    "item_log_since_last", "item_log_age",
    *(f"item_log_count_{w.name}" for w in WINDOWS), "item_log_count_all", "item_share_7d",
    "user_log_history", "user_log_gap",
)

SERVING_FEATURE_NAMES: tuple[str, ...] = (
    "retriever_score", "retriever_log_softmax", "retriever_log_rank",
    "sim_last", "sim_recent_mean", "sim_recent_max", "sim_query",
    "genre_match_recent", "genre_match_history", "year_gap_recent",
    "item_log_since_last", "item_log_age", "item_log_count_all",
    "user_log_history", "user_log_gap",
)
SERVING_FEATURE_SET = "pit-serving-v3"
"""Version of :data:`SERVING_FEATURE_NAMES` and their definitions: logged with every vector, so
a changed definition never mixes with examples computed under the old one."""


@dataclass(frozen=True)
class InteractionLog:
    """Every event's (item, time), sorted by item then time, for as-of lookups.

    ``keys`` packs (item, time) into one sortable integer so a whole batch of (item, as-of)
    lookups is one :func:`numpy.searchsorted`.
    """

    keys: IntArray
    times: IntArray
    all_times: IntArray
    origin: int
    stride: int

    @classmethod
    def from_events(cls, items: IntArray, times: IntArray) -> InteractionLog:
        items = np.asarray(items, dtype=np.int64)
        times = np.asarray(times, dtype=np.int64)
        origin = int(times.min()) if len(times) else 0
        stride = (int(times.max()) - origin + 2) if len(times) else 2
        keys = np.sort(items * stride + (times - origin))
        return cls(keys, keys % stride + origin, np.sort(times), origin, stride)

    @classmethod
    def from_split(cls, split: LeaveOneOutSplit) -> InteractionLog:
        """Every event of the dataset: training events and the validation and test targets."""
        items = [*split.train.items, split.validation.targets, split.test.targets]
        times = [*split.train.times, split.validation.query_times, split.test.query_times]
        return cls.from_events(np.concatenate(items), np.concatenate(times))

    def _position(self, items: IntArray, as_of: IntArray) -> IntArray:
        """Index of the first event of ``items`` at or after ``as_of`` (so the events before
        it, down to the item's first, are the ones strictly before ``as_of``)."""
        offset = np.clip(as_of - self.origin, 0, self.stride - 1)
        found: IntArray = np.searchsorted(self.keys, items * self.stride + offset, side="left")
        return found

    def count_between(self, items: IntArray, since: IntArray, as_of: IntArray) -> IntArray:
        """Events of each item with ``since <= time < as_of``."""
        counts: IntArray = self._position(items, as_of) - self._position(items, since)
        return np.maximum(counts, 0)

    def first_and_last(
        self, items: IntArray, as_of: IntArray
    ) -> tuple[Float64Array, Float64Array]:
        """Time of each item's first and last event before ``as_of`` (NaN when none); float64,
        as float32 would round epoch seconds to about a minute."""
        if len(self.times) == 0:
            none = np.full(items.shape, np.nan, dtype=np.float64)
            return none, none.copy()
        start = self._position(items, np.full_like(as_of, self.origin))
        end = self._position(items, as_of)
        seen = end > start
        last_index = np.clip(end - 1, 0, len(self.times) - 1)
        first_index = np.clip(start, 0, len(self.times) - 1)
        first = np.where(seen, self.times[first_index], np.nan).astype(np.float64)
        last = np.where(seen, self.times[last_index], np.nan).astype(np.float64)
        return first, last

    def total_between(self, since: IntArray, as_of: IntArray) -> IntArray:
        """Events of any item with ``since <= time < as_of``."""
        hi = np.searchsorted(self.all_times, as_of, side="left")
        lo = np.searchsorted(self.all_times, since, side="left")
        return (hi - lo).astype(np.int64)


def candidate_features(
    log: InteractionLog,
    content: ItemContent,
    item_vectors: FloatArray,
    queries: Queries,
    query_vectors: FloatArray,
    candidates: IntArray,
    retriever_scores: FloatArray,
) -> FloatArray:
    """``[n_queries, k, len(FEATURE_NAMES)]`` features of each query's k candidates.

    ``item_vectors [n_items + 1, d]`` and ``query_vectors [n_queries, d]`` are the retriever's;
    ``retriever_scores [n_queries, k]`` must be finite.
    """
    unit_items = unit_rows(item_vectors)
    as_of = np.broadcast_to(queries.query_times[:, None], candidates.shape).astype(np.int64)
    parts = [
        retriever_features(retriever_scores),
        _similarity(unit_items, unit_rows(query_vectors), queries.histories, candidates),
        content_features(content, queries.histories, candidates),
        _activity(log, candidates, as_of),
        _user(queries, candidates.shape[1]),
    ]
    features = np.concatenate(parts, axis=2).astype(np.float32)
    if features.shape[2] != len(FEATURE_NAMES):
        raise AssertionError("feature columns and FEATURE_NAMES disagree")
    return features


def serving_candidate_features(
    log: InteractionLog,
    content: ItemContent,
    item_vectors: FloatArray,
    queries: Queries,
    query_vectors: FloatArray,
    candidates: IntArray,
    retriever_scores: FloatArray,
) -> FloatArray:
    """``[n_queries, k, len(SERVING_FEATURE_NAMES)]``: the serving feature set of each query's
    candidates, computed offline (the same columns :func:`candidate_features` holds)."""
    unit_items = unit_rows(item_vectors)
    as_of = np.broadcast_to(queries.query_times[:, None], candidates.shape).astype(np.int64)
    items, times = candidates.ravel(), as_of.ravel()
    first, last = log.first_and_last(items, times)
    count = log.count_between(items, np.full_like(times, log.origin), times)
    state = item_state_features(first, last, count.astype(np.float64), times.astype(np.float64))
    parts = [
        retriever_features(retriever_scores),
        _similarity(unit_items, unit_rows(query_vectors), queries.histories, candidates),
        content_features(content, queries.histories, candidates),
        state.reshape(*candidates.shape, state.shape[1]),
        _user(queries, candidates.shape[1]),
    ]
    return np.concatenate(parts, axis=2).astype(np.float32)


def unit_rows(vectors: FloatArray) -> FloatArray:
    """Rows scaled to unit L2 norm (zero rows stay zero)."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    unit: FloatArray = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return unit


def retriever_features(scores: FloatArray) -> FloatArray:
    """``[q, k, 3]``: score, log-softmax over the query's candidates, log rank."""
    top = scores.max(axis=1, keepdims=True)
    log_softmax = scores - top - np.log(np.exp(scores - top).sum(axis=1, keepdims=True))
    order = np.argsort(-scores, axis=1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(scores.shape[1])[None, :], axis=1)
    return np.stack([scores, log_softmax, np.log1p(ranks)], axis=2).astype(np.float32)


def _tails(histories: Sequence[IntArray], n: int) -> IntArray:
    """The last n items of each history, left-padded with 0 (padding)."""
    tails = np.zeros((len(histories), n), dtype=np.int64)
    for row, history in enumerate(histories):
        tail = history[-n:]
        if len(tail):
            tails[row, n - len(tail):] = tail
    return tails


def _similarity(
    unit_items: FloatArray, unit_queries: FloatArray, histories: list[IntArray],
    candidates: IntArray,
) -> FloatArray:
    recent = _tails(histories, RECENT_ITEMS)
    present = recent > 0
    # Padding slots compare as zero vectors, whatever the retriever's padding row holds.
    recent_vectors = np.where(present[:, :, None], unit_items[recent], 0.0).astype(np.float32)
    return similarity_features(unit_items[candidates], recent_vectors, present, unit_queries)


def similarity_features(
    candidates: FloatArray, recent: FloatArray, present: npt.NDArray[np.bool_],
    queries: FloatArray,
) -> FloatArray:
    """``[q, k, 4]`` from unit vectors: ``candidates [q, k, d]``, the last
    :data:`RECENT_ITEMS` history items ``recent [q, r, d]`` (newest last, left-padded with zero
    rows that ``present [q, r]`` marks False) and ``queries [q, d]``."""
    sims = np.einsum("qkd,qrd->qkr", candidates, recent)  # padding rows are zero
    shown = np.asarray(present)[:, None, :]
    n_present = np.maximum(shown.sum(axis=2), 1)
    mean = sims.sum(axis=2) / n_present
    best = np.where(shown, sims, -1.0).max(axis=2)
    best = np.where(shown.any(axis=2), best, 0.0)
    query = np.einsum("qkd,qd->qk", candidates, queries)
    return np.stack([sims[:, :, -1], mean, best, query], axis=2).astype(np.float32)


def content_features(
    content: ItemContent, histories: Sequence[IntArray], candidates: IntArray
) -> FloatArray:
    """``[q, k, 3]``: the genre cosine of each candidate with the genre profile of the query's
    :data:`PROFILE_ITEMS` newest history items and of its whole history, and the absolute gap
    between its release year and the mean of the recent items' known years (0 when either is
    unknown). ``histories`` and ``candidates`` are indices into ``content``."""
    recent = _tails(histories, PROFILE_ITEMS)
    recent_profile = unit_rows(content.genres[recent].sum(axis=1))
    history_profile = unit_rows(np.stack([content.genres[h].sum(axis=0) for h in histories]))
    cand = content.genres[candidates]
    match_recent = np.einsum("qkg,qg->qk", cand, recent_profile)
    match_history = np.einsum("qkg,qg->qk", cand, history_profile)
    years = np.where(recent > 0, content.years[recent], np.nan)
    n_known = np.isfinite(years).sum(axis=1)
    mean_year = np.where(n_known > 0, np.nansum(years, axis=1) / np.maximum(n_known, 1), np.nan)
    gap = np.abs(content.years[candidates] - mean_year[:, None])
    gap = np.nan_to_num(gap, nan=0.0)
    return np.stack([match_recent, match_history, gap], axis=2).astype(np.float32)


def item_state_features(
    first: Float64Array, last: Float64Array, count: Float64Array, now: Float64Array
) -> FloatArray:
    """``[n, 3]`` from what is known of n items at times ``now``: the time of each one's first
    and last interaction (NaN when none) and its number of interactions. Log seconds since the
    last one (:data:`NEVER_S` when none), log seconds since the first one (0 when none), log
    count."""
    since_last = np.where(np.isfinite(last), now - last, NEVER_S)
    age = np.where(np.isfinite(first), now - first, 0.0)
    return np.stack(
        [np.log1p(np.maximum(since_last, 0.0)), np.log1p(np.maximum(age, 0.0)),
         np.log1p(np.maximum(count, 0.0))], axis=1,
    ).astype(np.float32)


def _activity(log: InteractionLog, candidates: IntArray, as_of: IntArray) -> FloatArray:
    items, times = candidates.ravel(), as_of.ravel()
    first, last = log.first_and_last(items, times)
    count = log.count_between(items, np.full_like(times, log.origin), times)
    state = item_state_features(first, last, count.astype(np.float64), times.astype(np.float64))
    columns: list[npt.NDArray[np.floating[Any]]] = [state[:, 0], state[:, 1]]
    for window in WINDOWS:
        since = _window_start(window, times)
        columns.append(np.log1p(log.count_between(items, since, times)))
    columns.append(state[:, 2])
    since_7d = _window_start(WINDOW_7D, times)
    recent = log.count_between(items, since_7d, times)
    total = np.maximum(log.total_between(since_7d, times), 1)
    columns.append(recent / total)
    stacked = np.stack(columns, axis=1).astype(np.float32)
    return stacked.reshape(*candidates.shape, len(columns))


def _window_start(window: Window, times: IntArray) -> IntArray:
    """:meth:`Window.start_s` of each time (computed once per distinct time)."""
    unique = np.unique(times)
    starts = np.fromiter((window.start_s(int(t)) for t in unique), dtype=np.int64,
                         count=len(unique))
    found: IntArray = starts[np.searchsorted(unique, times)]
    return found


def _user(queries: Queries, k: int) -> FloatArray:
    lengths = np.array([len(h) for h in queries.histories], dtype=np.float64)
    last = np.array(
        [t[-1] if len(t) else q for t, q in zip(queries.history_times, queries.query_times,
                                                 strict=True)],
        dtype=np.float64,
    )
    return user_features(lengths, last, queries.query_times.astype(np.float64), k)


def user_features(
    lengths: Float64Array, last_times: Float64Array, query_times: Float64Array, k: int
) -> FloatArray:
    """``[q, k, 2]``: log history length and log seconds since the previous event (the query
    time itself when there is none), repeated over the k candidates."""
    gap = np.maximum(query_times - last_times, 0.0)
    user = np.stack([np.log1p(lengths), np.log1p(gap)], axis=1).astype(np.float32)
    return np.repeat(user[:, None, :], k, axis=1)
