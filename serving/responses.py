"""Error answers: every request that can be identified gets exactly one response, even a bad one.

An error answer names the user's experiment arm like any other (serving/experiment.py: arms are
compared on every request of their users, failures included).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any, Literal

from schemas.fields import is_id, printable_text
from schemas.recommendations import RecommendationResponse, ResponseError
from schemas.wire import ContractError
from serving.metrics import ServeMetrics
from streams.kafka.deadletter import DeadLetterWriter, SourcePosition, Stage
from streams.kafka.producer import EventProducer

logger = logging.getLogger(__name__)

Assignment = Callable[[str], tuple[str, str]]
"""user id -> (the experiment in force, the user's arm in it)."""
SERVICE = "scorer"


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
    arm: tuple[str, str] | None = None,
) -> RecommendationResponse:
    """`arm`: the experiment and the user's arm in it (None: the scorer runs none)."""
    # The message names fields and reasons only (schemas.wire never echoes payloads).
    return RecommendationResponse(
        request_id=request_id,
        user_id=user_id,
        status="error",
        strategy="none",
        served_at=now,
        experiment=arm[0] if arm else None,
        arm=arm[1] if arm else None,
        error=ResponseError(code=code, message=printable_text(str(error))),
    )


def rejection_answer(
    raw: bytes | None, error: BaseException, now: float, assign: Assignment | None = None
) -> RecommendationResponse | None:
    """The error response to a request that failed its contract, when its ids can be recovered
    (None otherwise: the dead letter is then its only trace)."""
    ids = recover_ids(raw)
    if ids is None:
        return None
    return error_response(*ids, "invalid_request", error, now,
                          assign(ids[1]) if assign is not None else None)


class RespondingDeadLetters(DeadLetterWriter):
    """Dead letters for `rec.requests`; an identifiable bad request also gets an error answer."""

    def __init__(
        self,
        producer: EventProducer,
        responses_topic: str,
        metrics: ServeMetrics,
        assign: Assignment | None = None,
    ) -> None:
        super().__init__(producer, SERVICE)
        self._responses_topic = responses_topic
        self._metrics = metrics
        self._assign = assign

    def write(
        self,
        key: bytes | None,
        value: bytes | None,
        error: BaseException,
        source: SourcePosition,
        stage: Stage = "validate",
    ) -> None:
        if stage == "validate":
            self._metrics.requests.labels(outcome="invalid").inc()
            error = self._answer(value, error, source)
        super().write(key, value, error, source, stage)

    def _answer(
        self, value: bytes | None, error: BaseException, source: SourcePosition
    ) -> BaseException:
        """Sends the error response when the requester can be identified. Never raises: if even
        the error response cannot be built or sent, the dead letter says so instead."""
        try:
            response = rejection_answer(value, error, time.time(), self._assign)
            if response is not None:
                self._producer.send(self._responses_topic, response.user_id, response)
                self._metrics.answered(response)
            return error
        except Exception as failure:
            logger.error(
                "no error response topic=%s partition=%d offset=%d error=%s",
                source.topic, source.partition, source.offset, type(failure).__name__,
            )
            kind = error.kind if isinstance(error, ContractError) else type(error).__name__
            return ContractError(
                kind, f"{error} (no error response: {type(failure).__name__})"
            )
