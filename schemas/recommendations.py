"""Recommendation requests and responses (`rec.requests` -> `rec.responses`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.fields import (
    INTEGRAL,
    STRICT_RECORD,
    Id,
    IdList,
    NonNegative,
    SchemaVersion1,
    SchemaVersion2,
    Score,
    Text,
    Timestamp,
)
from schemas.limits import MAX_K


class RequestFilters(BaseModel):
    """Restrictions the application places on one answer."""

    model_config = STRICT_RECORD

    include_categories: IdList | None = None
    exclude_categories: IdList = Field(default_factory=list)
    exclude_seen: bool = True


class RecommendationRequest(BaseModel):
    """Key on the wire is `user_id`, so one user's requests stay in order on one partition."""

    model_config = STRICT_RECORD

    schema_version: SchemaVersion1 = 1
    request_id: Id
    user_id: Id
    session_id: Id | None = None
    k: Annotated[int, Field(ge=1, le=MAX_K), INTEGRAL] = 10
    exclude_items: IdList = Field(default_factory=list)
    filters: RequestFilters = Field(default_factory=RequestFilters)
    device: Literal["web", "ios", "android", "tv", "other"] | None = None
    sent_at: Timestamp


class ScoredItem(BaseModel):
    model_config = STRICT_RECORD

    item_id: Id
    score: Score


class ResponseError(BaseModel):
    model_config = STRICT_RECORD

    code: Literal["invalid_request", "internal", "overloaded"]
    message: Text


_ERROR_IFF_STATUS_ERROR: dict[str, Any] = {
    # The JSON Schema form of `_status_matches_error`.
    "if": {"properties": {"status": {"const": "error"}}, "required": ["status"]},
    "then": {"properties": {"error": {"type": "object"}}, "required": ["error"]},
    "else": {"properties": {"error": {"type": "null"}}},
}


class RecommendationResponse(BaseModel):
    """An answer, or an error answer; every request gets exactly one."""

    model_config = ConfigDict(**STRICT_RECORD, json_schema_extra=_ERROR_IFF_STATUS_ERROR)

    schema_version: SchemaVersion2 = 2
    request_id: Id
    user_id: Id
    status: Literal["ok", "error"]
    items: Annotated[list[ScoredItem], Field(max_length=MAX_K)] = Field(default_factory=list)
    model_version: Id | None = None
    strategy: Literal["model", "ranker", "canary", "popularity", "none"] = "model"
    """model: the serving version's retrieval order (no ranker passed the gate); ranker: the
    published ranker ordered the retrieved candidates; canary: the canary version; popularity:
    cold start; none: nothing to show."""
    feature_freshness_ms: NonNegative | None = None
    """The pipeline's lag behind the user's newest applied event: when the feature worker
    applied it in Redis minus when it entered the pipeline (its Kafka record time, else its
    event time). Backfilled history with old event times is not stale features. None when the
    user has no stored lag (unknown user, or features written before the lag was kept)."""
    model_freshness_ms: NonNegative | None = None
    """Age of the model version that served it (published -> served)."""
    served_at: Timestamp
    experiment: Id | None = None
    """The randomized experiment the user is assigned in (a stable salted hash of the user id),
    None when the scorer runs none."""
    arm: Id | None = None
    """The experiment arm that chose the serving policy of this answer; None with no experiment."""
    error: ResponseError | None = None

    @model_validator(mode="after")
    def _status_matches_error(self) -> Self:
        if (self.status == "error") != (self.error is not None):
            raise ValueError("an error response carries an error, and only an error response does")
        return self
