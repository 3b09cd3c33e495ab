"""Every wire record by name: the JSON Schema export and the docs iterate over this."""

from __future__ import annotations

from pydantic import BaseModel

from schemas.alerts import DriftAlert
from schemas.catalog import CatalogItem
from schemas.deadletter import DeadLetter
from schemas.events import InteractionEvent
from schemas.kpi import KpiReport
from schemas.model_updates import ModelUpdate
from schemas.ranker_examples import RankerExample, ServedFeatures
from schemas.recommendations import RecommendationRequest, RecommendationResponse

RECORDS: dict[str, type[BaseModel]] = {
    "InteractionEvent": InteractionEvent,
    "DeadLetter": DeadLetter,
    "RecommendationRequest": RecommendationRequest,
    "RecommendationResponse": RecommendationResponse,
    "ModelUpdate": ModelUpdate,
    "KpiReport": KpiReport,
    "DriftAlert": DriftAlert,
    "ServedFeatures": ServedFeatures,
    "RankerExample": RankerExample,
    "CatalogItem": CatalogItem,
}
