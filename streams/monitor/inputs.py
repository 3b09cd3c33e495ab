"""What the monitor reads of its input records: a contract record (pydantic, schemas/) or its
msgspec mirror (schemas/response_decoder.py, schemas/interaction_decoder.py), which the
monitor's batches decode to; the mirror holds the same values for every record it accepts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from schemas.events import EventType


class ShownItem(Protocol):
    @property
    def item_id(self) -> str: ...


class Response(Protocol):
    """What the join reads of an answer (`schemas.recommendations.RecommendationResponse`)."""

    @property
    def request_id(self) -> str: ...

    @property
    def user_id(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def items(self) -> Sequence[ShownItem]: ...

    @property
    def model_version(self) -> str | None: ...

    @property
    def strategy(self) -> str: ...

    @property
    def feature_freshness_ms(self) -> float | None: ...

    @property
    def model_freshness_ms(self) -> float | None: ...

    @property
    def served_at(self) -> float: ...

    @property
    def experiment(self) -> str | None: ...

    @property
    def arm(self) -> str | None: ...


class InteractionContext(Protocol):
    @property
    def price(self) -> float | None: ...

    @property
    def device(self) -> str | None: ...

    @property
    def source(self) -> str | None: ...

    @property
    def request_id(self) -> str | None: ...


class Interaction(Protocol):
    """What the join and the drift profile read of an interaction
    (`schemas.events.InteractionEvent`)."""

    @property
    def event_id(self) -> str: ...

    @property
    def user_id(self) -> str: ...

    @property
    def item_id(self) -> str: ...

    @property
    def event_type(self) -> EventType: ...

    @property
    def timestamp(self) -> float: ...

    @property
    def context(self) -> InteractionContext | None: ...
