"""The msgspec mirror of the response contract judges every record as the contract does.

The contract (pydantic, `schemas.wire.decode`) is the reference, as for the interaction mirror
(test_interaction_decoder.py): on the hostile corpus of `rec.responses`, on every field mutation
the JSON Schema agreement test makes, on generated answers (ok and error, with and without an
experiment, items and freshness figures) and on thousands of byte-level mutations of them, the
mirror must never accept what the contract refuses, must read the same values when both
accept, and must accept what the contract accepts except where it hands the record back (None:
the contract then decides), which only duplicate field names may cause.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from schemas import ContractError, decode, encode
from schemas.limits import DEFAULT_MAX_FUTURE_SKEW_S
from schemas.recommendations import (
    RecommendationResponse,
    ResponseError,
    ScoredItem,
)
from schemas.response_decoder import ResponseRecord, decode_response
from tests.hostile_corpus import corpus
from tests.unit.schemas.test_jsonschema_agreement import _documents

NOW = time.time()
LATEST = NOW + DEFAULT_MAX_FUTURE_SKEW_S


def _contract(raw: bytes | None) -> RecommendationResponse | ContractError:
    try:
        return decode(RecommendationResponse, raw, DEFAULT_MAX_FUTURE_SKEW_S, now=NOW)
    except ContractError as error:
        return error


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same JSON types; floats by their repr (-0.0 is not 0.0)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and repr(a) == repr(b)


def _same_values(fast: ResponseRecord, reference: RecommendationResponse) -> bool:
    """Every field alike but the version, a constant (the mirror holds it as a float)."""
    mirror = msgspec.to_builtins(fast)
    contract = reference.model_dump(mode="python")
    return mirror.pop("schema_version") == contract.pop("schema_version") and _same(
        mirror, contract
    )


def _generated(n: int, seed: int) -> Iterator[bytes]:
    rng = random.Random(seed)
    for i in range(n):
        if rng.random() < 0.1:
            yield encode(RecommendationResponse(
                request_id=f"r{i}", user_id=f"u{i % 50}", status="error", served_at=NOW - i,
                strategy="none",
                error=ResponseError(code=rng.choice(["internal", "overloaded"]),
                                    message=rng.choice(["busy", "the model is loading", ""])),
            ))
            continue
        k = rng.randrange(0, 25)
        experiment = rng.random() < 0.6
        yield encode(RecommendationResponse(
            request_id=f"r{i}", user_id=f"u{i % 50}", status="ok",
            items=[ScoredItem(item_id=f"i{rng.randrange(5000)}", score=rng.uniform(-50, 50))
                   for _ in range(k)],
            model_version=rng.choice([None, "v1", "2.0"]),
            strategy=rng.choice(["model", "ranker", "canary", "popularity"]),
            feature_freshness_ms=rng.choice([None, 0.0, rng.uniform(0, 1e6)]),
            model_freshness_ms=rng.choice([None, rng.uniform(0, 1e9)]),
            served_at=NOW - rng.uniform(0, 86_400),
            experiment="exp-1" if experiment else None,
            arm=rng.choice(["model", "ranker", "popularity"]) if experiment else None,
        ))


def _byte_mutations(valid: list[bytes], n: int, seed: int) -> Iterator[bytes]:
    rng = random.Random(seed)
    alphabet = b'{}[]":,.-+0123456789eEtrufalsn \\\n\x00\xff\x7fabcxyz_'
    for _ in range(n):
        raw = bytearray(rng.choice(valid))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(raw))
            op = rng.random()
            if op < 0.4:
                raw[at] = rng.choice(alphabet)
            elif op < 0.7:
                del raw[at]
            else:
                raw.insert(at, rng.choice(alphabet))
        yield bytes(raw)


def _field_mutations() -> Iterator[bytes]:
    for _, document in _documents("RecommendationResponse"):
        yield json.dumps(document).encode()
    error = json.loads(next(r for r in _generated(200, 1) if b'"error",' in r))
    for document in (
        error | {"error": None}, error | {"status": "ok"},
        error | {"error": {"code": "internal", "message": "line\nbreak"}},
        error | {"error": {"code": "internal", "message": "x" * 2049}},
        error | {"error": {"code": "teapot", "message": ""}},
        error | {"error": {"code": "internal"}},
        error | {"error": {"code": "internal", "message": "", "extra": 1}},
    ):
        yield json.dumps(document).encode()


def _duplicates() -> Iterator[bytes]:
    valid = next(_generated(1, 2))
    for name, first in (("user_id", '"bad id"'), ("served_at", "1e18"), ("user_id", '"u-9"')):
        yield valid[:-1] + f', "{name}": {first}}}'.encode()
        yield b"{" + f'"{name}": {first}, '.encode() + valid[1:]


def _all_records() -> list[bytes | None]:
    generated = list(_generated(1500, 5))
    return [
        *(h.value for h in corpus("rec.responses", NOW)),
        *_field_mutations(),
        *generated,
        *_byte_mutations(generated, 6000, seed=11),
        *_duplicates(),
    ]


@pytest.fixture(scope="module")
def records() -> list[bytes | None]:
    return _all_records()


def test_the_mirror_never_accepts_what_the_contract_refuses_and_reads_the_same_values(
    records: list[bytes | None],
) -> None:
    wrong, handed_back = [], []
    for raw in records:
        fast, reference = decode_response(raw, LATEST), _contract(raw)
        if fast is None:
            if isinstance(reference, RecommendationResponse):
                handed_back.append(raw)
        elif isinstance(reference, ContractError) or not _same_values(fast, reference):
            wrong.append((raw, reference))
    assert wrong == []
    # Only a repeated field name (the contract keeps the last) is left to the contract.
    assert all(raw is not None and raw.count(b'"user_id"') + raw.count(b'"served_at"') > 2
               for raw in handed_back), handed_back[:3]
    assert len(handed_back) <= 2


def test_both_verdicts_occur_often_in_the_corpus(records: list[bytes | None]) -> None:
    accepted = sum(decode_response(raw, LATEST) is not None for raw in records)
    assert 1500 <= accepted <= len(records) - 3000


def test_an_answer_served_ahead_of_the_reader_by_more_than_the_skew_is_handed_to_the_contract(
) -> None:
    answer = json.loads(next(_generated(1, 3)))
    ahead = json.dumps(answer | {"served_at": NOW + DEFAULT_MAX_FUTURE_SKEW_S + 60}).encode()
    just = json.dumps(answer | {"served_at": NOW + DEFAULT_MAX_FUTURE_SKEW_S - 60}).encode()
    assert decode_response(ahead, LATEST) is None
    assert isinstance(_contract(ahead), ContractError)
    assert decode_response(just, LATEST) is not None


def test_the_mirror_spells_the_contract_fields() -> None:
    assert set(ResponseRecord.__struct_fields__) == set(RecommendationResponse.model_fields)
    from schemas.response_decoder import ResponseErrorRecord, ScoredItemRecord

    assert set(ScoredItemRecord.__struct_fields__) == set(ScoredItem.model_fields)
    assert set(ResponseErrorRecord.__struct_fields__) == set(ResponseError.model_fields)


def test_the_mirror_takes_an_id_character_exactly_when_the_contract_does() -> None:
    base = RecommendationResponse(
        request_id="r1", user_id="u1", status="ok", served_at=NOW,
        items=[ScoredItem(item_id="i1", score=1.0)], experiment="e", arm="a",
    ).model_dump(mode="json")
    for code in range(0x300):
        for field in ("request_id", "user_id", "experiment", "arm", "item"):
            record = json.loads(json.dumps(base))
            if field == "item":
                record["items"][0]["item_id"] = "i" + chr(code)
            else:
                record[field] = "x" + chr(code)
            raw = json.dumps(record).encode()
            accepted = not isinstance(_contract(raw), ContractError)
            assert (decode_response(raw, LATEST) is not None) == accepted, (field, hex(code))
