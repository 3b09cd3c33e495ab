"""How long the feature worker waits to fill its next batch.

A longer wait folds more events into each entity's update (categories, popularity shards,
popular items), so Redis works less per event, and it adds as much to the features' age. The
fold pays only on a busy stream: at tens of events per second a batch holds a handful of events
with few entities in common, and the wait would be freshness lost for nothing. So the worker
waits `busy_batch_within_s` after a batch that arrived at `busy_events_per_s` or faster (a
backlog included), and `batch_within_s` otherwise.
"""

from __future__ import annotations

from streams.feature_worker.settings import StreamSettings


def next_batch_wait(settings: StreamSettings, events: int, waited_s: float) -> float:
    """The longest wait (s) for the next batch, after a consume that returned `events` records
    in `waited_s`."""
    busy = events > 0 and events >= settings.busy_events_per_s * waited_s
    return settings.busy_batch_within_s if busy else settings.batch_within_s
