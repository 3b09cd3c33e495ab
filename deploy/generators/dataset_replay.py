"""Replays a recorded dataset (user_id, item_id, timestamp) as live interaction events.

Used by the online-training benchmark, its integration test and the demo: rows become
InteractionEvents in time order, keyed by user, with sessions cut at 30 minutes of inactivity.
Event times can be kept (historical replay) or shifted so the last row lands "now". The
dataset's item metadata, where it has some, becomes CatalogItems (:func:`frame_items`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd

from schemas import EventType, InteractionEvent
from schemas.catalog import CatalogItem
from schemas.fields import printable_text

SESSION_GAP_S = 30 * 60


def frame_events(
    frame: pd.DataFrame, event_type: EventType = EventType.CLICK, shift_to_now: float | None = None
) -> Iterator[InteractionEvent]:
    """Events in chronological order (stable for ties). `shift_to_now`: the wall time the last
    row is moved to, keeping every gap; None keeps the recorded times."""
    ordered = frame.sort_values("timestamp", kind="stable")
    shift = 0.0
    if shift_to_now is not None and len(ordered):
        shift = shift_to_now - float(ordered["timestamp"].iloc[-1])
    last_seen: dict[str, float] = {}
    sessions: dict[str, int] = {}
    for n, (raw_user, raw_item, ts) in enumerate(
        zip(ordered["user_id"], ordered["item_id"], ordered["timestamp"], strict=True)
    ):
        user, item, t = str(raw_user), str(raw_item), float(ts)
        if t - last_seen.get(user, -1e18) > SESSION_GAP_S:
            sessions[user] = sessions.get(user, 0) + 1
        last_seen[user] = t
        yield InteractionEvent(
            event_id=f"r{n}",
            user_id=user,
            session_id=f"{user}-s{sessions[user]}",
            item_id=item,
            event_type=event_type,
            timestamp=t + shift,
        )


def frame_items(items: pd.DataFrame, updated_at: float) -> Iterator[CatalogItem]:
    """Catalog records from a frame with columns ``item_id``, ``title``, ``release_year``
    (NaN when unknown) and ``genres`` (tuples), as models.datasets.load_ml100k_items reads."""
    for item, title, year, genres in zip(
        items["item_id"], items["title"], items["release_year"], items["genres"], strict=True
    ):
        yield CatalogItem(
            item_id=str(item),
            title=printable_text(str(title), 256),
            genres=list(genres),
            release_year=None if pd.isna(year) else int(year),
            updated_at=updated_at,
        )
