"""The history a model version reads for a query, defined once for the scorer and the offline
reference (models/reference_answer.py), as the trainer builds its sequences.

From a user's events, each (item id, event time in seconds):

1. event-time order in whole seconds, ties in the order the events came: the order full
   retrains and offline sequences sort by (online_trainer.retrain.split_recent,
   models.sequences.encode). The online trainer appends in stream order, the same order for a
   user whose events arrive in time order (one user's events share a partition);
2. events of items the version has no row for are left out (the trainer keeps no event without
   a row, in history or as a target);
3. an event repeating the item just before it (a view, then a click of the same item) is left
   out: it is no next-item example, and the trainer neither learns it nor keeps it in history
   (online_trainer.online_model);
4. the newest `length` remain, times in whole seconds as the trainer stores them (the encoder's
   gaps are whole seconds).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import itemgetter


def query_history(
    events: Iterable[tuple[str, float]], rows: Mapping[str, int], length: int
) -> list[tuple[int, int]]:
    """(row, time) pairs, oldest first, of what a version with item rows `rows` encodes."""
    stamped = [(int(ts), item) for item, ts in events]
    stamped.sort(key=itemgetter(0))  # stable: ties keep their order; linear when in order
    history: list[tuple[int, int]] = []
    row_of = rows.get
    previous = 0
    for ts, item in stamped:
        row = row_of(item)
        if row is None or row == previous:
            continue
        history.append((row, ts))
        previous = row
    return history[-length:] if length > 0 else []
