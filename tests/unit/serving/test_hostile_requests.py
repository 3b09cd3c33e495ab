"""`rec.requests`: every hostile request is dead-lettered, answered with an error response when
(and only when) its ids are valid, and the scorer's dead-letter path never raises."""

from __future__ import annotations

import json
from typing import Any

import pytest

from schemas import DeadLetter, RecommendationResponse, decode
from schemas.topics import dead_letter_topic
from serving import responses as scorer_responses
from serving.metrics import ServeMetrics
from serving.responses import RespondingDeadLetters
from streams.kafka.deadletter import SourcePosition
from tests.hostile_corpus import corpus, valid_document
from tests.unit.streams.kafka.recording import RecordingProducer

TOPIC = "rec.requests"
RESPONSES = "rec.responses"


def _writer(producer: RecordingProducer) -> RespondingDeadLetters:
    sink: Any = producer
    return RespondingDeadLetters(sink, RESPONSES, ServeMetrics(), lambda user: ("exp", "a1"))


def _reject(writer: RespondingDeadLetters, key: bytes | None, value: bytes | None, n: int) -> None:
    from schemas import ContractError, RecommendationRequest

    try:
        decode(RecommendationRequest, value)
    except ContractError as error:
        writer.write(key, value, error, SourcePosition(TOPIC, 0, n))
    else:
        raise AssertionError("a hostile request passed its contract")


def test_a_request_id_ending_in_a_newline_is_dead_lettered_without_an_answer() -> None:
    producer = RecordingProducer()
    raw = json.dumps(valid_document(TOPIC, request_id="r-1\n")).encode()
    _reject(_writer(producer), b"u-1", raw, 0)
    assert producer.to(RESPONSES) == []
    (letter,) = [decode(DeadLetter, v) for v in producer.to(dead_letter_topic(TOPIC))]
    assert letter.original_value == raw and letter.error_class == "SchemaViolation"


def test_every_hostile_request_is_dead_lettered_and_answers_carry_valid_ids() -> None:
    producer = RecordingProducer()
    writer = _writer(producer)
    hostile = corpus(TOPIC)
    for n, record in enumerate(hostile):
        _reject(writer, record.key, record.value, n)
    letters = [decode(DeadLetter, v) for v in producer.to(dead_letter_topic(TOPIC))]
    assert [letter.source_offset for letter in letters] == list(range(len(hostile)))
    answers = [decode(RecommendationResponse, v) for v in producer.to(RESPONSES)]
    assert answers, "requests with valid ids and another fault are answered"
    for answer in answers:
        assert answer.status == "error" and answer.error is not None
        assert answer.error.code == "invalid_request"  # decode checked its ids are valid
        assert (answer.experiment, answer.arm) == ("exp", "a1")


def test_when_even_the_error_response_fails_the_dead_letter_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*_: object) -> None:
        raise ValueError("cannot build")

    monkeypatch.setattr(scorer_responses, "rejection_answer", broken)
    producer = RecordingProducer()
    raw = json.dumps(valid_document(TOPIC, k=0)).encode()
    _reject(_writer(producer), b"u-1", raw, 3)
    assert producer.to(RESPONSES) == []
    (letter,) = [decode(DeadLetter, v) for v in producer.to(dead_letter_topic(TOPIC))]
    assert letter.source_offset == 3 and letter.original_value == raw
    assert "no error response: ValueError" in letter.error_message
