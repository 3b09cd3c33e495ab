"""Everything the ranker gets for one request, and its dense vector in a fixed, documented order.

`DENSE_FEATURES` is the layout: one row per candidate item, one float per name, in this order.
Counts and durations are log1p-compressed; an unknown duration (never happened) reads as
`UNKNOWN_DURATION_S`, i.e. "a long time ago"; rates are in [0, 1]; cyclic time is in [-1, 1].
Append new features at the end only: models trained on a prefix of the layout stay valid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from streams.features.views import (
    ItemFeatures,
    SessionFeatures,
    TimeFeatures,
    UserFeatures,
)

UNKNOWN_DURATION_S = 365 * 86400.0

DENSE_FEATURES: tuple[str, ...] = (
    # time of the request (as_of), UTC
    "hour_sin",
    "hour_cos",
    "dow_sin",
    "dow_cos",
    # user
    "user_log_events",
    "user_log_1h",
    "user_log_24h",
    "user_log_7d",
    "user_log_s_since_event",
    "user_log_s_since_purchase",
    # session
    "session_log_events",
    "session_log_duration_s",
    "session_log_last_gap_s",
    "session_log_mean_gap_s",
    # item
    "item_log_views",
    "item_log_1h",
    "item_log_24h",
    "item_log_7d",
    "item_ctr",
    "item_cvr",
    "item_log_s_since_event",
    # item's category
    "category_log_1h",
    "category_log_24h",
    "category_log_7d",
    "category_ctr",
    "category_cvr",
    # crossings
    "user_category_affinity",
    "item_in_session",
    "item_in_user_history",
)


def _log(x: float | None) -> float:
    return math.log1p(min(UNKNOWN_DURATION_S, x) if x is not None else UNKNOWN_DURATION_S)


def _count(x: int) -> float:
    return math.log1p(x)


@dataclass(frozen=True)
class FeatureSet:
    as_of: float
    time: TimeFeatures
    user: UserFeatures
    session: SessionFeatures
    items: tuple[ItemFeatures, ...]
    newest_event_ts: float | None
    """Event time of the newest event behind any feature read (freshness = as_of - this)."""

    def dense(self) -> list[list[float]]:
        """One row per item in `items` order; columns in DENSE_FEATURES order."""
        t, u, s = self.time, self.user, self.session
        shared = [
            t.hour_sin,
            t.hour_cos,
            t.dow_sin,
            t.dow_cos,
            _count(u.rates.events),
            _count(u.counts.last_1h),
            _count(u.counts.last_24h),
            _count(u.counts.last_7d),
            _log(u.seconds_since_last_event),
            _log(u.seconds_since_last_purchase),
            _count(s.events),
            _log(s.duration_s),
            _log(s.last_gap_s or 0.0),
            _log(s.mean_gap_s or 0.0),
        ]
        in_session = {e.item_id for e in s.sequence}
        in_history = {e.item_id for e in u.sequence}
        rows = []
        for item in self.items:
            cat = item.category_features
            rows.append(
                [
                    *shared,
                    _count(item.rates.views),
                    _count(item.counts.last_1h),
                    _count(item.counts.last_24h),
                    _count(item.counts.last_7d),
                    item.rates.ctr,
                    item.rates.cvr,
                    _log(item.seconds_since_last_event),
                    _count(cat.counts.last_1h) if cat else 0.0,
                    _count(cat.counts.last_24h) if cat else 0.0,
                    _count(cat.counts.last_7d) if cat else 0.0,
                    cat.rates.ctr if cat else item.rates.ctr,
                    cat.rates.cvr if cat else item.rates.cvr,
                    u.category_affinity.get(item.category, 0.0) if item.category else 0.0,
                    1.0 if item.item_id in in_session else 0.0,
                    1.0 if item.item_id in in_history else 0.0,
                ]
            )
        return rows
