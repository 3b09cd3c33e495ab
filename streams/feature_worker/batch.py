"""Validated events with their source positions, and what every script call starts with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import msgspec

from schemas.limits import MAX_TIMESTAMP_S, MIN_TIMESTAMP_S
from streams.features.definitions import (
    HOUR_BUCKETS,
    MINUTE_BUCKETS,
    POPULARITY_BUCKETS,
    SEQUENCE_LENGTH,
)

DEFAULT_USER_TTL_S = 30 * 86_400
DEFAULT_SESSION_TTL_S = 86_400


@dataclass(frozen=True)
class KeyTtls:
    """How long a user's and a session's keys live after their last write (wall-clock s)."""

    user_s: int = DEFAULT_USER_TTL_S
    session_s: int = DEFAULT_SESSION_TTL_S


class InteractionContext(Protocol):
    """What the features read of an event's context."""

    @property
    def category(self) -> str | None: ...


class Interaction(Protocol):
    """What the features read of a valid interaction: a contract record
    (`schemas.events.InteractionEvent`) or its msgspec mirror
    (`schemas.interaction_decoder.InteractionRecord`), which the worker's batches decode to."""

    @property
    def user_id(self) -> str: ...

    @property
    def session_id(self) -> str: ...

    @property
    def item_id(self) -> str: ...

    @property
    def event_type(self) -> str: ...

    @property
    def timestamp(self) -> float: ...

    @property
    def context(self) -> InteractionContext | None: ...


class PositionedEvent(NamedTuple):
    """A valid event and where it was read: the (partition, offset) is its idempotence key (a
    named tuple: a batch builds thousands)."""

    partition: int
    offset: int
    event: Interaction
    entered_ms: int | None = None
    """The record's Kafka timestamp (ms): when the event entered the pipeline; None when the
    record has none (then the event time stands in for it, see `entered_ms`)."""


def script_header(ttls: KeyTtls) -> list[str]:
    """The script's ARGV before the entity kind, the writer's clock and the update."""
    return [
        str(SEQUENCE_LENGTH),
        str(MINUTE_BUCKETS),
        str(HOUR_BUCKETS),
        str(POPULARITY_BUCKETS),
        str(ttls.user_s),
        str(ttls.session_s),
    ]


timestamp_text: Callable[[float], str] = repr
"""The canonical text of an event time (Python's shortest round-trip repr), stored as is."""

_encode_json = msgspec.json.Encoder().encode


def timestamp_texts(times: list[float]) -> list[str]:
    """`timestamp_text` of each time, for a whole batch at once: msgspec formats a list of floats
    in one C call with the shortest round-trip digits, as repr does, and in repr's positional
    form for every time the contract admits, (MIN_TIMESTAMP_S, MAX_TIMESTAMP_S]; repr per time
    cost a tenth of the fold. A batch holding any other time (none passes validation) is
    formatted by repr."""
    if not times or not MIN_TIMESTAMP_S < min(times) <= max(times) <= MAX_TIMESTAMP_S:
        return list(map(timestamp_text, times))
    text = _encode_json(times).decode()
    if "n" in text:  # NaN or infinity (written as null), which min and max may pass over
        return list(map(timestamp_text, times))
    return text[1:-1].split(",")


def entered_ms(item: PositionedEvent) -> int:
    """When the event entered the pipeline, in whole ms: its record's Kafka time, else its
    event time. The user's `lag_ms` (feature freshness) is measured from it."""
    if item.entered_ms is not None and item.entered_ms > 0:
        return item.entered_ms
    return round(item.event.timestamp * 1000)
