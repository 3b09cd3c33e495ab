"""Interaction events: the source of truth published by applications to `interactions`."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from schemas.fields import STRICT_RECORD, Id, SchemaVersion1, Timestamp


class EventType(StrEnum):
    """The funnel, in order: a purchase is the strongest signal of intent."""

    VIEW = "view"
    CLICK = "click"
    ADD_TO_CART = "add_to_cart"
    PURCHASE = "purchase"


class EventContext(BaseModel):
    """Optional context an application may attach; every field is bounded."""

    model_config = STRICT_RECORD

    price: Annotated[float, Field(ge=0.0, le=1e9)] | None = None
    category: Id | None = None
    device: Literal["web", "ios", "android", "tv", "other"] | None = None
    source: Literal["search", "home", "recommendation", "category", "other"] | None = None
    request_id: Id | None = None
    """The recommendation request that led here, when the click came from a recommendation."""


class InteractionEvent(BaseModel):
    """One user-item interaction; key on the wire is `user_id`."""

    model_config = STRICT_RECORD

    schema_version: SchemaVersion1 = 1
    event_id: Id
    user_id: Id
    session_id: Id
    item_id: Id
    event_type: EventType
    timestamp: Timestamp
    context: EventContext | None = None
