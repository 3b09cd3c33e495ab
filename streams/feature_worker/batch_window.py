"""How long the feature worker waits to fill its next batch.

A longer wait folds more events into each entity's update (categories, popularity shards,
popular items), so Redis works less per event, and it adds as much to the features' age. The
fold pays only on a busy stream: at tens of events per second a batch holds a handful of events
with few entities in common, and the wait would be freshness lost for nothing. So the worker
waits `busy_batch_within_s` after a batch that arrived at `busy_events_per_s` or faster (a
backlog included), and `batch_within_s` otherwise.

The window runs from the previous consume's return, not from the next consume's call: the
records that arrived while the worker applied the previous batch have waited that long already,
so the consume waits only what is left of the window (nothing when applying took longer), and
the oldest record of a batch waits about one window in the worker, not a window on top of the
previous batch's apply time. The arrival rate is counted over the same span.
"""

from __future__ import annotations

from streams.feature_worker.settings import StreamSettings


def next_batch_wait(settings: StreamSettings, events: int, arrived_within_s: float) -> float:
    """The window (s) of the next batch, after a consume that returned `events` records that
    arrived within `arrived_within_s` (since the consume before it returned)."""
    busy = events > 0 and events >= settings.busy_events_per_s * arrived_within_s
    return settings.busy_batch_within_s if busy else settings.batch_within_s


def consume_timeout(window_s: float, since_last_consume_s: float) -> float:
    """How long the next consume may wait: what is left of the window once the worker is back
    from applying the previous batch (0: take what is queued at once)."""
    return max(0.0, window_s - since_last_consume_s)
