"""Error answers: every request that can be identified gets exactly one response, even a bad one."""

from __future__ import annotations

import json
from typing import Any, Literal

from schemas.fields import is_id, printable_text
from schemas.recommendations import RecommendationResponse, ResponseError


def recover_ids(raw: bytes | None) -> tuple[str, str] | None:
    """(request_id, user_id) from a rejected payload, when both are present and valid ids.

    Valid by the contract's own rule (schemas.fields.is_id, a full match): an id the contract
    refuses, such as one ending in a newline, cannot address an error response either."""
    if raw is None:
        return None
    try:
        document: Any = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    request_id, user_id = document.get("request_id"), document.get("user_id")
    if is_id(request_id) and is_id(user_id):
        return request_id, user_id
    return None


def error_response(
    request_id: str,
    user_id: str,
    code: Literal["invalid_request", "internal", "overloaded"],
    error: BaseException,
    now: float,
) -> RecommendationResponse:
    # The message names fields and reasons only (schemas.wire never echoes payloads).
    return RecommendationResponse(
        request_id=request_id,
        user_id=user_id,
        status="error",
        strategy="none",
        served_at=now,
        error=ResponseError(code=code, message=printable_text(str(error))),
    )


def rejection_answer(
    raw: bytes | None, error: BaseException, now: float
) -> RecommendationResponse | None:
    """The error response to a request that failed its contract, when its ids can be recovered
    (None otherwise: the dead letter is then its only trace)."""
    ids = recover_ids(raw)
    if ids is None:
        return None
    return error_response(*ids, "invalid_request", error, now)
