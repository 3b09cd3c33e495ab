"""The exported JSON Schemas and the Python contracts agree on every generated record.

An independent validator (the `jsonschema` package, Python `re` for patterns) and the contracts
judge the same documents: each contract's example, and mutations of every field of it (wrong
types, empty and oversized strings, control characters, out-of-range and implausible numbers,
extra and missing fields). The reader-relative rule (how far ahead of the reader's clock a
timestamp may be) is not part of a schema by design, so the contracts are run without it here
(`max_future_skew_s=inf`); fixed time bounds both sides share stand in for it. Sums across
fields are not JSON Schema either (a KpiReport's user buckets add up to its totals): a document
that breaks one must be refused by the contract, whatever the schema says.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from schemas import ContractError, decode, encode
from schemas.jsonschema_export import SCHEMA_DIR
from schemas.limits import MAX_ID_LENGTH, MAX_LIST_LENGTH, MAX_TEXT_LENGTH
from schemas.registry import RECORDS
from tests.contract_examples import examples

Path = tuple[str | int, ...]

_YEAR_S = 365 * 86400.0

_STRINGS: list[object] = [
    "", "x" * (MAX_ID_LENGTH + 1), "x" * (MAX_TEXT_LENGTH + 1), "id\n", "id\r\n", "\nid",
    "id\x00", "i d", "id\t", "idé", "id\u202e", "id\x85", "id\u2028", "\U0001f600",
    "id\x7f", "1.0", "1.0\n", "10.5", "QQ", "QQ=", "QQ==", "/w==", "_w==", "_w==\n",
    7, 7.0, None, True, [], {},
]
_NUMBERS: list[object] = [
    0, 0.0, -1, -1.0, 1, 1.0, 1.5, 10.0, 1e18, -1e18, 1e308, 2**53, 2**53 + 1, 2**63,
    631_152_000.0, 631_152_000.5, 4_102_444_800.0, 4_102_444_800.5, "1", True, None, [], {},
]
_LISTS: list[object] = [[], [None], [1], ["ok", "bad\n"], ["x"] * (MAX_LIST_LENGTH + 1), "x", {}]
_OBJECTS: list[object] = [{}, [], "x", 1, None]


def _leaves(doc: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    yield path, doc
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from _leaves(value, (*path, index))


def _replaced(doc: Any, path: Path, value: object) -> Any:
    out = copy.deepcopy(doc)
    target = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return out


def _removed(doc: Any, path: Path) -> Any:
    out = copy.deepcopy(doc)
    target = out
    for step in path[:-1]:
        target = target[step]
    del target[path[-1]]
    return out


def _time_values(now: float) -> list[object]:
    return [now, now + _YEAR_S, now * 1000, now * 1e6, now * 1e9, -now, 1e18, 86400.0]


def _candidates(value: Any, now: float) -> list[object]:
    if isinstance(value, bool):
        return [0, 1, "true", None]
    if isinstance(value, str):
        return _STRINGS
    if isinstance(value, int | float):
        return _NUMBERS + _time_values(now)
    if isinstance(value, list):
        return _LISTS
    if isinstance(value, dict):
        return _OBJECTS
    return [*_STRINGS[:3], *_NUMBERS[:3], {}]  # a null field: any type


def _documents(name: str) -> Iterator[tuple[str, Any]]:
    record = examples()[name]
    now = json.loads(encode(examples()["InteractionEvent"]))["timestamp"]
    base = json.loads(encode(record))
    yield "valid", base
    for path, value in _leaves(base):
        if not path:
            continue
        for candidate in _candidates(value, now):
            yield f"{path}={candidate!r:.40}", _replaced(base, path, candidate)
        if isinstance(path[-1], str):
            yield f"without {path}", _removed(base, path)
            parent = _replaced(base, path, value) if len(path) == 1 else base
            yield f"extra field next to {path}", _replaced(parent, (*path[:-1], "extra"), 1)
    yield "not an object", [base]


def _schema(name: str) -> dict[str, Any]:
    """The committed file: what non-Python producers validate against."""
    document: dict[str, Any] = json.loads((SCHEMA_DIR / f"{name}.json").read_text())
    return document


def _contract_accepts(name: str, document: Any) -> bool:
    try:
        decode(RECORDS[name], json.dumps(document).encode(), max_future_skew_s=math.inf)
    except ContractError:
        return False
    return True


def _breaks_a_sum(name: str, document: Any) -> bool:
    """Whether a document breaks a rule across fields that no JSON Schema states."""
    if name != "KpiReport" or not isinstance(document, dict):
        return False
    n, h = document.get("bucket_responses"), document.get("bucket_hits")
    responses, hits = document.get("responses"), document.get("hits")
    if not all(isinstance(v, list) and all(isinstance(x, int | float) for x in v)
               for v in (n, h)) or not all(isinstance(v, int | float)
                                           for v in (responses, hits)):
        return False
    assert isinstance(n, list) and isinstance(h, list)
    return (sum(n) != responses or sum(h) != hits
            or any(hb > nb for hb, nb in zip(h, n, strict=False)))


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_json_schema_and_contract_agree_on_valid_and_mutated_records(name: str) -> None:
    validator = jsonschema.Draft202012Validator(_schema(name))
    disagreements = []
    verdicts = []
    for case, document in _documents(name):
        verdicts.append(accepted := _contract_accepts(name, document))
        if _breaks_a_sum(name, document):
            if accepted:
                disagreements.append(f"{case} (a sum)")
        elif validator.is_valid(document) != accepted:
            disagreements.append(case)
    assert disagreements == []
    # Both sides of every rule are exercised: many mutations stay valid (boundary values,
    # integral floats, optional fields left out), most do not.
    assert 50 <= sum(verdicts) <= len(verdicts) - 250


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_every_schema_names_its_dialect_and_is_itself_valid(name: str) -> None:
    document = _schema(name)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.validators.validator_for(document).check_schema(document)


@pytest.mark.parametrize(
    "timestamp",
    [0.0, -1.0, 1e18, 1_700_000_000_000.0, 100.0],
    ids=["zero", "negative", "1e18", "milliseconds", "a duration"],
)
def test_implausible_event_times_fail_both_the_schema_and_the_contract(timestamp: float) -> None:
    document = json.loads(encode(examples()["InteractionEvent"])) | {"timestamp": timestamp}
    validator = jsonschema.Draft202012Validator(_schema("InteractionEvent"))
    assert not validator.is_valid(document)
    assert not _contract_accepts("InteractionEvent", document)
