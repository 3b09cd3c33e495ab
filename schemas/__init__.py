"""Versioned, strictly validated wire contracts and the topic catalog."""

from schemas.alerts import DriftAlert
from schemas.deadletter import DeadLetter
from schemas.events import EventContext, EventType, InteractionEvent
from schemas.kpi import KpiReport
from schemas.model_updates import ModelUpdate, TrainingWindow
from schemas.recommendations import (
    RecommendationRequest,
    RecommendationResponse,
    RequestFilters,
    ResponseError,
    ScoredItem,
)
from schemas.wire import ContractError, decode, encode

__all__ = [
    "ContractError",
    "DeadLetter",
    "DriftAlert",
    "EventContext",
    "EventType",
    "InteractionEvent",
    "KpiReport",
    "ModelUpdate",
    "RecommendationRequest",
    "RecommendationResponse",
    "RequestFilters",
    "ResponseError",
    "ScoredItem",
    "TrainingWindow",
    "decode",
    "encode",
]
