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

DEFAULT_USER_TTL_S = 30 * 86_400
DEFAULT_SESSION_TTL_S = 86_400


@dataclass(frozen=True)
class KeyTtls:
    """How long a user's and a session's keys live after their last write (wall-clock s)."""

    user_s: int = DEFAULT_USER_TTL_S
    session_s: int = DEFAULT_SESSION_TTL_S


@dataclass(frozen=True)
class PositionedEvent:
    """A valid event and where it was read: the (partition, offset) is its idempotence key."""

    partition: int
    offset: int
    event: InteractionEvent


def script_header(key_prefix: str, ttls: KeyTtls) -> list[str]:
    return [
        key_prefix,
        str(SEQUENCE_LENGTH),
        str(MINUTE_BUCKETS),
        str(HOUR_BUCKETS),
        str(POPULARITY_HOURS),
        *(str(AFFINITY_WEIGHTS[code]) for code in ("view", "click", "cart", "purchase")),
        str(ttls.user_s),
        str(ttls.session_s),
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


def script_args(key_prefix: str, ttls: KeyTtls, batch: Sequence[PositionedEvent]) -> list[str]:
    """The header, then every event as one tab-separated line of one text argument."""
    lines = "\n".join("\t".join(event_fields(item)) for item in batch)
    return [*script_header(key_prefix, ttls), lines]
