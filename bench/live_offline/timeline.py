"""When things happen in a live replay: each event's request, its publication, its arrival in
the feature store and in the trainer's micro-batches, and the attribution window of its request.

The live replay (the demo, `bench live`) sends event i's request at its slot s_i and the event
itself `lead_s` later, stamped with the clock then; the feature worker applies it `pipeline_s`
after that. At a replay `rate` the slots are i / rate (months of history pass in minutes); with
no rate they are the dataset's own timestamps. The history a request sees is therefore the
events applied by its slot, which for a user acting in a burst (ML-100K users rate dozens of
films within seconds, in consecutive rows) leaves out that user's newest events.

A user-paced schedule (deploy.generators.replay_schedule) holds a user's next request until
their previous event has been published, so their history holds it.

The pre-training part is history when the replay starts (the demo's backfill): its events keep
their gaps and end `BACKFILL_AGE_S` before the first slot.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from deploy.generators.replay_schedule import request_times

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

BACKFILL_AGE_S = 3600.0
"""The newest pre-training event is this old when the replay starts (as in the demo)."""


@dataclass(frozen=True)
class Clock:
    """How the replay paces events and how long each hop takes."""

    rate: float | None = 80.0
    """Events per second of the replay; None keeps the dataset's timestamps."""
    lead_s: float = 0.5
    """A request leaves this long before the event it precedes."""
    pipeline_s: float = 0.05
    """From an event's publication to its features in the store."""
    batch_timeout_s: float = 0.5
    """The trainer's micro-batch: what arrived within this long (its `batch_timeout_s`)."""
    batch_max_events: int = 512
    """... and at most this many events (its `batch_size`)."""
    load_s: float = 1.0
    """From a version's publication to the scorer answering with it."""
    user_gap_s: float | None = None
    """Set: a user-paced schedule, where a user's next request leaves at least this long after
    the user's previous event was published, so their history holds it (None: every request
    leaves at its slot, however fast the user acts)."""
    restamp_history: bool = False
    """The pre-training part restamped at the replay rate too, so the gaps the model learned
    from are on the clock it serves on (False: the dataset's gaps, as the demo's backfill)."""


@dataclass(frozen=True)
class Timeline:
    """The replayed part, in replay order; `first_*` the pre-training part (backfill)."""

    users: list[str]
    items: list[str]
    original: FloatArray
    """Each event's timestamp in the dataset."""
    slots: FloatArray
    """Request time of each event."""
    times: FloatArray
    """Each event's timestamp as published (slot + lead)."""
    visible: IntArray
    """Replayed events already applied to the feature store when request i is served: a
    prefix length, never more than i."""
    batch_ends: IntArray
    """The trainer's micro-batches: event i is in batch b when batch_ends[b-1] <= i <
    batch_ends[b]."""
    batch_closed: FloatArray
    """When each micro-batch has been consumed (its learning and publication time)."""
    first_users: list[str]
    first_items: list[str]
    first_times: FloatArray

    def __len__(self) -> int:
        return len(self.users)


def ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """Time order, ties in file order (as deploy.generators.dataset_replay.frame_events)."""
    return frame.sort_values("timestamp", kind="stable").reset_index(drop=True)


def build(first: pd.DataFrame, replayed: pd.DataFrame, clock: Clock) -> Timeline:
    """`first` (pre-training) and `replayed` in time order; the timeline is in request order
    (the dataset's, unless a user-paced schedule holds a user's next event back)."""
    original = replayed["timestamp"].to_numpy(dtype=np.float64)
    first_t = first["timestamp"].to_numpy(dtype=np.float64)
    users = [str(u) for u in replayed["user_id"]]
    if clock.rate is None:
        slots = original - clock.lead_s
    else:
        start = (first_t[-1] if len(first_t) else 0.0) + BACKFILL_AGE_S
        slots = request_times(users, start, clock.rate, clock.lead_s, clock.user_gap_s)
        if clock.restamp_history and len(first_t):
            first_t = start - BACKFILL_AGE_S - np.arange(len(first_t))[::-1] / clock.rate
    order = np.argsort(slots, kind="stable")
    slots = slots[order]
    times = slots + clock.lead_s
    # Event j is visible to request i when it was applied by i's slot (and j < i).
    visible = np.searchsorted(times + clock.pipeline_s, slots, side="right")
    visible = np.minimum(np.maximum.accumulate(visible), np.arange(len(slots)))
    ends, closed = _micro_batches(times, clock)
    items = [str(i) for i in replayed["item_id"]]
    return Timeline(
        users=[users[j] for j in order],
        items=[items[j] for j in order],
        original=original[order],
        slots=slots,
        times=times,
        visible=visible.astype(np.int64),
        batch_ends=ends,
        batch_closed=closed,
        first_users=[str(u) for u in first["user_id"]],
        first_items=[str(i) for i in first["item_id"]],
        first_times=first_t,
    )


def _micro_batches(times: FloatArray, clock: Clock) -> tuple[IntArray, FloatArray]:
    """Cut as the trainer's consumer does: a batch closes `batch_timeout_s` after its first
    event arrived, or at `batch_max_events`."""
    ends: list[int] = []
    closed: list[float] = []
    start = 0
    while start < len(times):
        limit = times[start] + clock.batch_timeout_s
        end = int(np.searchsorted(times, limit, side="right"))
        end = max(start + 1, min(end, start + clock.batch_max_events))
        ends.append(end)
        closed.append(max(limit, float(times[end - 1])))
        start = end
    return np.asarray(ends, dtype=np.int64), np.asarray(closed, dtype=np.float64)


def window_items(timeline: Timeline, window_s: float) -> list[frozenset[str]]:
    """Per request, the items its user interacted with from the request's slot up to
    `window_s` after it (the attribution window; its own event included)."""
    by_user: dict[str, list[int]] = {}
    for i, user in enumerate(timeline.users):
        by_user.setdefault(user, []).append(i)
    out: list[frozenset[str]] = [frozenset()] * len(timeline)
    for events in by_user.values():
        times = timeline.times[events]
        for k, i in enumerate(events):
            end = int(np.searchsorted(times, timeline.slots[i] + window_s, side="right"))
            out[i] = frozenset(timeline.items[j] for j in events[k : max(end, k + 1)])
    return out


def tied_items(timeline: Timeline) -> list[frozenset[str]]:
    """Per request, the items of its user's events with the same dataset timestamp as the
    event it precedes: the order within one second of a burst is the file's, not the user's,
    so 'the next item' is any of them."""
    out: list[frozenset[str]] = [frozenset()] * len(timeline)
    groups: dict[tuple[str, float], list[int]] = {}
    for i, (user, t) in enumerate(zip(timeline.users, timeline.original, strict=True)):
        groups.setdefault((user, float(t)), []).append(i)
    for events in groups.values():
        for k, i in enumerate(events):
            out[i] = frozenset(timeline.items[j] for j in events[k:])
    return out
