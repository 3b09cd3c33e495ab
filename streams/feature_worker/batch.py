"""A batch of validated events with their source positions, grouped into per-entity script calls."""

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
from streams.features.keys import FeatureKeys, popularity_shard

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
    entered_ms: int | None = None
    """The record's Kafka timestamp (ms): when the event entered the pipeline; None when the
    record has none (then the event time stands in for it, see `entered_ms_text`)."""


def script_header(ttls: KeyTtls) -> list[str]:
    """The script's ARGV before the entity kind and its events."""
    return [
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


def entered_ms_text(item: PositionedEvent) -> str:
    """When the event entered the pipeline, in whole ms: its record's Kafka time, else its
    event time. The user's `lag_ms` (feature freshness) is measured from it."""
    if item.entered_ms is not None and item.entered_ms > 0:
        return str(item.entered_ms)
    return str(round(item.event.timestamp * 1000))


def event_line(item: PositionedEvent, category: str) -> str:
    e = item.event
    return (
        f"{item.partition}\t{item.offset}\t{e.user_id}\t{e.session_id}\t{e.item_id}\t"
        f"{category}\t{TYPE_CODES[e.event_type]}\t{timestamp_text(e.timestamp)}\t"
        f"{entered_ms_text(item)}"
    )


@dataclass(frozen=True)
class EntityCall:
    """One script call: events (script lines, in stream order) for one entity of one kind."""

    kind: str
    """u (user), s (session), i (item), c (category) or p (a popularity shard)."""
    key: str
    lines: str


def entity_calls(
    keys: FeatureKeys, batch: Sequence[PositionedEvent], max_events: int
) -> list[EntityCall]:
    """The batch grouped per entity, each entity's events kept in stream order and cut into
    calls of at most `max_events` (the bound on how long one call holds Redis).

    Entities never read each other's state, so applying entity by entity is the same as
    applying the events one at a time; only the order within an entity matters."""
    groups: dict[str, tuple[str, list[str]]] = {}
    for item in batch:
        e = item.event
        category = e.context.category if e.context is not None and e.context.category else ""
        line = event_line(item, category)
        targets = [
            ("u", keys.user(e.user_id)),
            ("s", keys.session(e.session_id)),
            ("i", keys.item(e.item_id)),
            ("p", keys.popularity(popularity_shard(e.item_id))),
        ]
        if category:
            targets.append(("c", keys.category(category)))
        for kind, key in targets:
            group = groups.get(key)
            if group is None:
                groups[key] = (kind, [line])
            else:
                group[1].append(line)
    return [
        EntityCall(kind, key, "\n".join(lines[start : start + max_events]))
        for key, (kind, lines) in groups.items()
        for start in range(0, len(lines), max_events)
    ]
