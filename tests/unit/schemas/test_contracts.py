from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from schemas import (
    ContractError,
    DeadLetter,
    InteractionEvent,
    RecommendationRequest,
    RecommendationResponse,
    decode,
    encode,
)
from schemas.kpi import KpiReport
from schemas.limits import MAX_PAYLOAD_BYTES
from schemas.registry import RECORDS
from tests.contract_examples import examples


def _event(**changes: Any) -> bytes:
    body = json.loads(encode(examples()["InteractionEvent"]))
    body.update(changes)
    return json.dumps(body).encode()


def _kind(raw: bytes, model: type[BaseModel] = InteractionEvent) -> str:
    with pytest.raises(ContractError) as info:
        decode(model, raw)
    return info.value.kind


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_every_record_round_trips_through_its_wire_form(name: str) -> None:
    record = examples()[name]
    assert decode(type(record), encode(record)) == record


def test_example_set_covers_every_registered_record() -> None:
    assert set(examples()) == set(RECORDS)


def test_dead_letter_keeps_arbitrary_original_bytes() -> None:
    letter = examples()["DeadLetter"]
    assert isinstance(letter, DeadLetter)
    assert decode(DeadLetter, encode(letter)).original_value == b"\xff\x00not json"


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (b"{", "MalformedJson"),
        (b"", "MalformedJson"),
        (b"[" * 10_000 + b"]" * 10_000, "MalformedJson"),
        (b"\xff\xfe{}", "InvalidEncoding"),
        (b'{"user_id": "\xed\xa0\x80"}', "InvalidEncoding"),
        (b"x" * (MAX_PAYLOAD_BYTES + 1), "PayloadTooLarge"),
    ],
    ids=["truncated", "empty", "deeply-nested", "invalid-utf8", "lone-surrogate", "oversized"],
)
def test_unparseable_payloads_are_rejected_with_a_stable_kind(raw: bytes, kind: str) -> None:
    assert _kind(raw) == kind


def test_missing_value_is_rejected() -> None:
    with pytest.raises(ContractError) as info:
        decode(InteractionEvent, None)
    assert info.value.kind == "MissingValue"


@pytest.mark.parametrize(
    "changes",
    [
        {"unexpected": 1},
        {"timestamp": "NaN"},
        {"timestamp": -5.0},
        {"timestamp": 0},
        # An explicit id: one computed from the clock differs between the xdist workers.
        pytest.param({"timestamp": time.time() + 3 * 24 * 3600}, id="timestamp=3 days ahead"),
        {"timestamp": 1e300},
        {"timestamp": 10**400},
        {"timestamp": "1700000000"},
        {"event_type": "like"},
        {"event_type": "VIEW"},
        {"user_id": ""},
        {"user_id": "has space"},
        {"user_id": "tab\tinside"},
        {"user_id": "u-1\n"},
        {"user_id": "u-1\r\n"},
        {"user_id": "\nu-1"},
        {"user_id": "u\x00"},
        {"user_id": "u\u202e"},
        {"user_id": "ü"},
        {"timestamp": 1_700_000_000_000.0},
        {"timestamp": 1e18},
        {"timestamp": 3600.0},
        {"user_id": "x" * 129},
        {"user_id": 42},
        {"item_id": None},
        {"schema_version": 2},
        {"context": {"price": -1.0}},
        {"context": {"price": 1e10}},
        {"context": {"device": "fridge"}},
        {"context": {"colour": "red"}},
        {"context": [1, 2, 3]},
    ],
    ids=lambda c: next(iter(c)) + "=" + repr(next(iter(c.values())))[:20],
)
def test_event_contract_violations_are_rejected(changes: dict[str, Any]) -> None:
    assert _kind(_event(**changes)) == "SchemaViolation"


def test_nan_and_infinity_literals_are_rejected() -> None:
    for literal in (b"NaN", b"Infinity", b"-Infinity"):
        raw = _event(timestamp=0).replace(b'"timestamp": 0', b'"timestamp": ' + literal)
        assert _kind(raw) == "SchemaViolation"


def test_missing_required_field_is_rejected() -> None:
    body = json.loads(encode(examples()["InteractionEvent"]))
    del body["session_id"]
    assert _kind(json.dumps(body).encode()) == "SchemaViolation"


def test_error_message_names_fields_but_never_echoes_the_payload() -> None:
    secret = "credit-card-4111111111111111"
    with pytest.raises(ContractError) as info:
        decode(InteractionEvent, _event(user_id=secret + " x"))
    assert "user_id" in str(info.value)
    assert secret not in str(info.value)


@pytest.mark.parametrize("k", [0, -1, 501, 10**30])
def test_request_k_out_of_range_is_rejected(k: int) -> None:
    body = json.loads(encode(examples()["RecommendationRequest"]))
    body["k"] = k
    assert _kind(json.dumps(body).encode(), RecommendationRequest) == "SchemaViolation"


def test_request_exclusion_list_is_bounded() -> None:
    body = json.loads(encode(examples()["RecommendationRequest"]))
    body["exclude_items"] = [f"i{n}" for n in range(1001)]
    assert _kind(json.dumps(body).encode(), RecommendationRequest) == "SchemaViolation"


def test_error_response_requires_an_error_and_ok_forbids_one() -> None:
    body = json.loads(encode(examples()["RecommendationResponse"]))
    body["status"] = "error"
    assert _kind(json.dumps(body).encode(), RecommendationResponse) == "SchemaViolation"
    body["error"] = {"code": "invalid_request", "message": "k out of range"}
    assert decode(RecommendationResponse, json.dumps(body).encode()).status == "error"


def test_encode_refuses_a_record_over_the_payload_cap() -> None:
    huge = RecommendationResponse.model_construct(
        request_id="r",
        user_id="u",
        status="ok",
        items=[],
        served_at=time.time(),
        model_version="1.0",
        error=None,
        strategy="model",
        feature_freshness_ms=None,
        model_freshness_ms=None,
        schema_version=2,
    )
    object.__setattr__(huge, "request_id", "r" * (MAX_PAYLOAD_BYTES + 10))
    with pytest.raises(ContractError) as info:
        encode(huge)
    assert info.value.kind == "PayloadTooLarge"


def test_records_are_immutable() -> None:
    event = examples()["InteractionEvent"]
    with pytest.raises(ValueError, match="frozen"):
        event.user_id = "other"  # type: ignore[attr-defined]


@pytest.mark.parametrize(("ahead_s", "accepted"), [(-3600.0, True), (299.0, True), (301.0, False)])
def test_a_reader_rejects_timestamps_beyond_its_skew(ahead_s: float, accepted: bool) -> None:
    now = 1_800_000_000.0
    raw = _event(timestamp=now + ahead_s)
    if accepted:
        assert decode(InteractionEvent, raw, max_future_skew_s=300.0, now=now).timestamp > 0
    else:
        assert _kind_at(raw, now) == "SchemaViolation"


def test_the_default_skew_is_minutes_so_an_hour_ahead_is_rejected() -> None:
    assert _kind(_event(timestamp=time.time() + 3600)) == "SchemaViolation"
    assert decode(InteractionEvent, _event(timestamp=time.time() + 60)).event_id


def test_records_built_in_process_are_held_to_the_fixed_time_bounds_only() -> None:
    event = examples()["InteractionEvent"]
    ahead = event.model_copy(update={"timestamp": time.time() + 86400}).model_dump()
    assert InteractionEvent.model_validate(ahead).timestamp == ahead["timestamp"]


def _kind_at(raw: bytes, now: float) -> str:
    with pytest.raises(ContractError) as info:
        decode(InteractionEvent, raw, max_future_skew_s=300.0, now=now)
    return info.value.kind


def _kpi_buckets_changed(change: Callable[[list[int], list[int]], object]) -> bytes:
    body = json.loads(encode(examples()["KpiReport"]))
    change(body["bucket_responses"], body["bucket_hits"])
    return json.dumps(body).encode()


def _move_hits_into_bucket_zero(n: list[int], h: list[int]) -> None:
    h[0], h[1], h[2] = h[0] + h[1] + h[2], 0, 0  # 3 hits in a bucket of 2 responses


@pytest.mark.parametrize(
    "change",
    [
        lambda n, h: n.pop(),  # one bucket short
        lambda n, h: (n.append(0), h.append(0)),  # one bucket too many
        lambda n, h: n.__setitem__(0, n[0] + 1),  # no longer sums to responses
        lambda n, h: h.__setitem__(40, h[40] + 1),  # no longer sums to hits
        lambda n, h: (h.__setitem__(0, -1), h.__setitem__(40, h[40] + 2)),  # negative
        _move_hits_into_bucket_zero,
    ],
    ids=["short", "long", "responses-sum", "hits-sum", "negative", "hits-over-responses"],
)
def test_kpi_reports_with_inconsistent_user_buckets_are_rejected(
    change: Callable[[list[int], list[int]], object],
) -> None:
    assert _kind(_kpi_buckets_changed(change), KpiReport) == "SchemaViolation"


def test_a_kpi_report_of_the_previous_version_is_rejected() -> None:
    body = json.loads(encode(examples()["KpiReport"]))
    body["schema_version"] = 3
    assert _kind(json.dumps(body).encode(), KpiReport) == "SchemaViolation"
