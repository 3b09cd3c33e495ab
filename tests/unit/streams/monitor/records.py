"""Builders for the records the monitor consumes (shared by this package's tests)."""

from __future__ import annotations

import numpy as np

from schemas.events import EventContext, EventType, InteractionEvent
from schemas.ranker_examples import ServedFeatures, encode_vectors
from schemas.recommendations import RecommendationResponse, ResponseError, ScoredItem

T0 = 1_750_000_000.0


def response(
    request_id: str,
    user: str = "u1",
    items: tuple[str, ...] = ("a", "b", "c"),
    served_at: float = T0,
    version: str | None = "v1",
    feature_freshness_ms: float | None = None,
) -> RecommendationResponse:
    return RecommendationResponse(
        request_id=request_id,
        user_id=user,
        status="ok",
        items=[ScoredItem(item_id=i, score=1.0) for i in items],
        model_version=version,
        served_at=served_at,
        feature_freshness_ms=feature_freshness_ms,
    )


def error_response(request_id: str, served_at: float = T0) -> RecommendationResponse:
    return RecommendationResponse(
        request_id=request_id, user_id="u1", status="error", served_at=served_at,
        error=ResponseError(code="internal", message="boom"),
    )


def interaction(
    item: str,
    at: float,
    kind: EventType = EventType.CLICK,
    user: str = "u1",
    request_id: str | None = None,
    event_id: str | None = None,
) -> InteractionEvent:
    """Without an `event_id`, one of its own for each user, item, kind and time."""
    return InteractionEvent(
        event_id=event_id or f"e-{user}-{item}-{kind.value}-{at}", user_id=user,
        session_id="s1", item_id=item, event_type=kind,
        timestamp=at, context=EventContext(request_id=request_id) if request_id else None,
    )


def served_features(
    request_id: str,
    user: str = "u1",
    candidates: tuple[str, ...] = ("a", "b", "c", "d"),
    shown: tuple[str, ...] = ("a", "b", "c"),
    served_at: float = T0,
) -> ServedFeatures:
    """Row n of the vectors is `[n, n + 0.5]`, so a test can tell the rows apart."""
    rows = np.array([[n, n + 0.5] for n in range(len(candidates))], dtype=np.float32)
    return ServedFeatures(
        request_id=request_id, user_id=user, served_at=served_at, features_at=served_at,
        model_version="v1", feature_set="test-set", n_features=2, candidates=list(candidates),
        vectors=encode_vectors(rows), strategy="retrieval_order", shown=list(shown),
    )
