"""Error answers: every request that can be identified gets exactly one response, even a bad one."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from schemas.limits import MAX_ID_LENGTH, MAX_TEXT_LENGTH
from schemas.recommendations import RecommendationResponse, ResponseError

_ID = re.compile(rf"^[\x21-\x7e]{{1,{MAX_ID_LENGTH}}}$")


def recover_ids(raw: bytes | None) -> tuple[str, str] | None:
    """(request_id, user_id) from a rejected payload, when both are present and valid ids."""
    if raw is None:
        return None
    try:
        document: Any = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    request_id, user_id = document.get("request_id"), document.get("user_id")
    if not (isinstance(request_id, str) and isinstance(user_id, str)):
        return None
    if _ID.match(request_id) and _ID.match(user_id):
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
    message = "".join(c if c.isprintable() else "?" for c in str(error))[:MAX_TEXT_LENGTH]
    return RecommendationResponse(
        request_id=request_id,
        user_id=user_id,
        status="error",
        strategy="none",
        served_at=now,
        error=ResponseError(code=code, message=message),
    )
