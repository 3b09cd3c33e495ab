"""A batch of validated events with their source positions, flattened into the script's ARGV."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from schemas.events import InteractionEvent
from streams.features.definitions import (
    AFFINITY_WEIGHTS,
    HOUR_BUCKETS,
    MINUTE_BUCKETS,
    POPULARITY_HOURS,
    SEQUENCE_LENGTH,
    TYPE_CODES,
)


@dataclass(frozen=True)
class PositionedEvent:
    """A valid event and where it was read: the (partition, offset) is its idempotence key."""

    partition: int
    offset: int
    event: InteractionEvent


def script_header(key_prefix: str) -> list[str]:
    return [
        key_prefix,
        str(SEQUENCE_LENGTH),
        str(MINUTE_BUCKETS),
        str(HOUR_BUCKETS),
        str(POPULARITY_HOURS),
        *(str(AFFINITY_WEIGHTS[code]) for code in ("view", "click", "cart", "purchase")),
    ]


def timestamp_text(ts: float) -> str:
    """The canonical text of an event time (Python's shortest round-trip repr), stored as is."""
    return repr(ts)


def event_fields(item: PositionedEvent) -> list[str]:
    e = item.event
    category = e.context.category if e.context is not None and e.context.category else ""
    return [
        str(item.partition),
        str(item.offset),
        e.user_id,
        e.session_id,
        e.item_id,
        category,
        TYPE_CODES[e.event_type],
        timestamp_text(e.timestamp),
    ]


def script_args(key_prefix: str, batch: Sequence[PositionedEvent]) -> list[str]:
    """The header, then every event as one tab-separated line of one text argument."""
    lines = "\n".join("\t".join(event_fields(item)) for item in batch)
    return [*script_header(key_prefix), lines]
