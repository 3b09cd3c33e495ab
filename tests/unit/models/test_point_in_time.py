"""Point-in-time features: nothing at or after the request time reaches them, and the activity
windows count what the stream's bucketed windows count."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from models.item_content import ItemContent
from models.point_in_time import FEATURE_NAMES, InteractionLog, candidate_features
from models.sequences import Queries
from streams.features.windows import WINDOWS

N_ITEMS = 20
T = 1_000_000


def _events(rng: np.random.Generator, n: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.integers(1, N_ITEMS + 1, n).astype(np.int64), rng.integers(lo, hi, n)


def _inputs(rng: np.random.Generator) -> tuple[ItemContent, np.ndarray, Queries, np.ndarray]:
    genres = ["a", "b", "c", "d"]
    items = pd.DataFrame({
        "item_id": [str(i) for i in range(N_ITEMS)],
        "release_year": rng.integers(1950, 2000, N_ITEMS).astype(float),
        "genres": [tuple(rng.choice(genres, 2, replace=False)) for _ in range(N_ITEMS)],
    })
    content = ItemContent.from_frame(items, [str(i) for i in range(N_ITEMS)])
    histories = [rng.integers(1, N_ITEMS + 1, n).astype(np.int64) for n in (1, 4, 9)]
    queries = Queries(
        histories=histories,
        history_times=[np.sort(rng.integers(T - 50_000, T - 10, len(h))) for h in histories],
        query_times=np.array([T, T - 5, T + 3_600], dtype=np.int64),
        targets=np.array([1, 2, 3], dtype=np.int64),
    )
    candidates = np.stack([rng.permutation(np.arange(1, N_ITEMS + 1))[:6] for _ in histories])
    return content, rng.normal(size=(N_ITEMS + 1, 8)).astype(np.float32), queries, candidates


def _features(log: InteractionLog, rng_seed: int = 1) -> np.ndarray:
    content, vectors, queries, candidates = _inputs(np.random.default_rng(rng_seed))
    scores = np.random.default_rng(2).normal(size=candidates.shape).astype(np.float32)
    query_vectors = np.random.default_rng(3).normal(size=(3, 8)).astype(np.float32)
    return candidate_features(log, content, vectors, queries, query_vectors, candidates, scores)


def test_features_at_t_ignore_every_event_at_or_after_t() -> None:
    rng = np.random.default_rng(0)
    past_items, past_times = _events(rng, 3_000, T - 30 * 86_400, T - 5)  # before every query
    before = _features(InteractionLog.from_events(past_items, past_times))
    assert before.shape == (3, 6, len(FEATURE_NAMES))
    assert np.isfinite(before).all()
    # Later events for the same items, some at exactly the last query's time (T + 3600).
    later_items, later_times = _events(rng, 3_000, T + 3_600, T + 90 * 86_400)
    at_t_items = np.arange(1, N_ITEMS + 1, dtype=np.int64)
    at_t_times = np.full(N_ITEMS, T + 3_600, dtype=np.int64)
    log = InteractionLog.from_events(
        np.concatenate([past_items, later_items, at_t_items]),
        np.concatenate([past_times, later_times, at_t_times]),
    )
    np.testing.assert_array_equal(_features(log), before)


def test_an_event_just_before_t_does_change_the_item_features() -> None:
    rng = np.random.default_rng(0)
    items, times = _events(rng, 500, T - 30 * 86_400, T - 100_000)
    before = _features(InteractionLog.from_events(items, times))
    more = InteractionLog.from_events(np.concatenate([items, np.arange(1, N_ITEMS + 1)]),
                                      np.concatenate([times, np.full(N_ITEMS, T - 6)]))
    changed = np.abs(_features(more) - before).max(axis=(0, 1)) > 0
    assert changed[FEATURE_NAMES.index("item_log_since_last")]
    assert changed[FEATURE_NAMES.index("item_log_count_1h")]
    assert not changed[FEATURE_NAMES.index("retriever_score")]


def test_window_counts_equal_the_stream_windows_over_bucketed_events() -> None:
    rng = np.random.default_rng(4)
    items, times = _events(rng, 5_000, T - 8 * 86_400, T + 86_400)
    log = InteractionLog.from_events(items, times)
    for as_of in (T, T + 59, T + 7_200 + 1):
        for window in WINDOWS:
            before = times < as_of
            for item in (1, 7, 20):
                buckets = Counter(str(window.family.bucket(t))
                                  for t in times[before & (items == item)])
                expected = window.count({b: str(n) for b, n in buckets.items()}, as_of)
                got = log.count_between(np.array([item]), np.array([window.start_s(as_of)]),
                                        np.array([as_of]))
                assert int(got[0]) == expected, (window.name, as_of, item)


def test_time_since_the_items_last_event_is_exact_to_the_second_at_epoch_scale() -> None:
    epoch_t = 890_000_000  # ML-100K's era: float32 would round this to 64 s
    log = InteractionLog.from_events(np.array([3, 3, 4]),
                                     np.array([epoch_t - 900, epoch_t - 5, epoch_t - 1]))
    first, last = log.first_and_last(np.array([3, 4, 5]), np.full(3, epoch_t))
    assert last[0] == epoch_t - 5 and first[0] == epoch_t - 900
    assert last[1] == epoch_t - 1
    assert np.isnan(last[2]) and np.isnan(first[2])
