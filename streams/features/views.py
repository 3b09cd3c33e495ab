"""What the feature store returns: typed, point-in-time views built from the raw Redis hashes.

Views are computed at a reference time `as_of` (a request's time for the scorer, an event's time
for the trainer): windows are summed relative to it and "seconds since" is measured from it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from streams.features.definitions import CTR_PRIOR_WEIGHT, CVR_PRIOR_WEIGHT
from streams.features.windows import WINDOW_1H, WINDOW_7D, WINDOW_24H

Hash = Mapping[str, str]


@dataclass(frozen=True)
class WindowCounts:
    last_1h: int = 0
    last_24h: int = 0
    last_7d: int = 0

    @staticmethod
    def read(minutes: Hash, hours: Hash, as_of: float) -> WindowCounts:
        return WindowCounts(
            WINDOW_1H.count(minutes, as_of),
            WINDOW_24H.count(hours, as_of),
            WINDOW_7D.count(hours, as_of),
        )


@dataclass(frozen=True)
class SequenceEntry:
    item_id: str
    timestamp: float
    event_type: str
    """Short type code: view, click, cart, purchase."""


@dataclass(frozen=True)
class TimeFeatures:
    """Hour of day and day of week (UTC) of `as_of`, on the unit circle."""

    hour_sin: float
    hour_cos: float
    dow_sin: float
    dow_cos: float

    @staticmethod
    def at(ts: float) -> TimeFeatures:
        moment = datetime.fromtimestamp(ts, UTC)
        hour = (moment.hour + moment.minute / 60 + moment.second / 3600) / 24
        dow = (moment.weekday() + hour) / 7
        return TimeFeatures(
            math.sin(2 * math.pi * hour),
            math.cos(2 * math.pi * hour),
            math.sin(2 * math.pi * dow),
            math.cos(2 * math.pi * dow),
        )


@dataclass(frozen=True)
class Rates:
    """Type counts and their smoothed target encodings (global rates as priors)."""

    views: int = 0
    clicks: int = 0
    carts: int = 0
    purchases: int = 0
    ctr: float = 0.0
    """(clicks + m * global_ctr) / (views + m), m = CTR_PRIOR_WEIGHT."""
    cvr: float = 0.0
    """(purchases + m * global_cvr) / (clicks + m), m = CVR_PRIOR_WEIGHT."""

    @property
    def events(self) -> int:
        return self.views + self.clicks + self.carts + self.purchases

    @staticmethod
    def read(h: Hash, prior: Rates | None = None) -> Rates:
        views, clicks = int(h.get("n_view", 0)), int(h.get("n_click", 0))
        carts, purchases = int(h.get("n_cart", 0)), int(h.get("n_purchase", 0))
        if prior is None:  # global totals and users: plain (unsmoothed) rates
            return Rates(
                views, clicks, carts, purchases, clicks / max(views, 1), purchases / max(clicks, 1)
            )
        ctr = (clicks + CTR_PRIOR_WEIGHT * prior.ctr) / (views + CTR_PRIOR_WEIGHT)
        cvr = (purchases + CVR_PRIOR_WEIGHT * prior.cvr) / (clicks + CVR_PRIOR_WEIGHT)
        return Rates(views, clicks, carts, purchases, ctr, cvr)


def _float(h: Hash, name: str) -> float | None:
    value = h.get(name)
    return float(value) if value is not None else None


def since(as_of: float, ts: float | None) -> float | None:
    return None if ts is None else max(0.0, as_of - ts)


def parse_sequence(entries: list[str]) -> tuple[SequenceEntry, ...]:
    parsed = []
    for entry in entries:
        item, ts, code = entry.split(" ")
        parsed.append(SequenceEntry(item, float(ts), code))
    return tuple(parsed)


@dataclass(frozen=True)
class UserFeatures:
    user_id: str
    known: bool
    rates: Rates
    counts: WindowCounts
    seconds_since_last_event: float | None
    seconds_since_last_purchase: float | None
    previous_gap_s: float | None
    """Lag seen by the user's newest event: seconds since the event before it."""
    category_affinity: dict[str, float]
    """Share of the user's weighted interactions per category (weights: AFFINITY_WEIGHTS)."""
    sequence: tuple[SequenceEntry, ...]
    """Newest first, at most SEQUENCE_LENGTH."""
    newest_event_ts: float | None

    @staticmethod
    def read(
        user_id: str, h: Hash, minutes: Hash, hours: Hash, seq: list[str], as_of: float
    ) -> UserFeatures:
        weights = {k[4:]: int(v) for k, v in h.items() if k.startswith("aff:")}
        total = sum(weights.values())
        last = _float(h, "last_ts")
        return UserFeatures(
            user_id=user_id,
            known=bool(h),
            rates=Rates.read(h),
            counts=WindowCounts.read(minutes, hours, as_of),
            seconds_since_last_event=since(as_of, last),
            seconds_since_last_purchase=since(as_of, _float(h, "last_purchase_ts")),
            previous_gap_s=_float(h, "prev_gap"),
            category_affinity={c: w / total for c, w in weights.items()} if total else {},
            sequence=parse_sequence(seq),
            newest_event_ts=last,
        )


@dataclass(frozen=True)
class SessionFeatures:
    session_id: str
    known: bool
    events: int
    duration_s: float
    seconds_since_last_event: float | None
    last_gap_s: float | None
    mean_gap_s: float | None
    max_gap_s: float | None
    sequence: tuple[SequenceEntry, ...]
    newest_event_ts: float | None

    @staticmethod
    def read(session_id: str, h: Hash, seq: list[str], as_of: float) -> SessionFeatures:
        events = int(h.get("n", 0))
        last, start = _float(h, "last_ts"), _float(h, "start_ts")
        gap_sum = _float(h, "gap_sum")
        return SessionFeatures(
            session_id=session_id,
            known=bool(h),
            events=events,
            duration_s=(last - start) if last is not None and start is not None else 0.0,
            seconds_since_last_event=since(as_of, last),
            last_gap_s=_float(h, "last_gap"),
            mean_gap_s=gap_sum / (events - 1) if gap_sum is not None and events > 1 else None,
            max_gap_s=_float(h, "gap_max"),
            sequence=parse_sequence(seq),
            newest_event_ts=last,
        )


@dataclass(frozen=True)
class CategoryFeatures:
    category: str
    rates: Rates
    counts: WindowCounts
    newest_event_ts: float | None


@dataclass(frozen=True)
class ItemFeatures:
    item_id: str
    known: bool
    category: str | None
    rates: Rates
    counts: WindowCounts
    seconds_since_last_event: float | None
    newest_event_ts: float | None
    category_features: CategoryFeatures | None = field(default=None)

    @staticmethod
    def read(
        item_id: str,
        h: Hash,
        minutes: Hash,
        hours: Hash,
        prior: Rates,
        as_of: float,
        category: str | None,
    ) -> ItemFeatures:
        last = _float(h, "last_ts")
        return ItemFeatures(
            item_id=item_id,
            known=bool(h),
            category=category or h.get("cat"),
            rates=Rates.read(h, prior),
            counts=WindowCounts.read(minutes, hours, as_of),
            seconds_since_last_event=since(as_of, last),
            newest_event_ts=last,
        )


def read_category(
    category: str, h: Hash, minutes: Hash, hours: Hash, prior: Rates, as_of: float
) -> CategoryFeatures:
    return CategoryFeatures(
        category,
        Rates.read(h, prior),
        WindowCounts.read(minutes, hours, as_of),
        _float(h, "last_ts"),
    )
