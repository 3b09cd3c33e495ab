"""Hostile input for every door: bytes no producer should send, each of which a consumer must
turn into a dead letter (and, on `rec.requests`, an error response when the requester can be
identified) without ever raising out of its loop.

One corpus per door, built from that door's valid example so that each entry is wrong in one
way only: the byte level (empty, not UTF-8, oversized, nested beyond any parser's patience, JSON
that is not an object), the value level (NaN, wrong types, extra and missing fields), ids (a
trailing newline, control characters, non-ASCII, too long), timestamps (negative, zero,
milliseconds, 1e18, a year or an hour ahead) and the envelope (no key, binary keys, garbage
headers).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from schemas import encode
from schemas.limits import MAX_ID_LENGTH, MAX_PAYLOAD_BYTES
from schemas.topics import (
    ALERTS_DRIFT,
    CATALOG_ITEMS,
    INTERACTIONS,
    KPI_METRICS,
    MODEL_UPDATES,
    REC_REQUESTS,
    REC_RESPONSES,
    TopicSpec,
)
from tests.contract_examples import examples

Headers = list[tuple[str, bytes]]


@dataclass(frozen=True)
class Door:
    topic: TopicSpec
    record: str
    """Name of the contract (schemas.registry.RECORDS)."""
    id_field: str
    time_field: str
    table: bool = False
    """A compacted table whose reader deletes a row on a tombstone: only one whose key names no
    row is hostile there."""


DOORS: dict[str, Door] = {
    d.topic.name: d
    for d in (
        Door(INTERACTIONS, "InteractionEvent", "user_id", "timestamp"),
        Door(REC_REQUESTS, "RecommendationRequest", "request_id", "sent_at"),
        Door(REC_RESPONSES, "RecommendationResponse", "request_id", "served_at"),
        Door(MODEL_UPDATES, "ModelUpdate", "model_name", "published_at"),
        Door(KPI_METRICS, "KpiReport", "model_version", "window_end"),
        Door(ALERTS_DRIFT, "DriftAlert", "alert_id", "detected_at"),
        Door(CATALOG_ITEMS, "CatalogItem", "item_id", "updated_at", table=True),
    )
}


@dataclass(frozen=True)
class Hostile:
    name: str
    key: bytes | None
    value: bytes | None
    headers: Headers | None = None


GARBAGE_HEADERS: Headers = [
    ("", b""),
    ("\x00\xff\u202e", b"\xff\xfe\x00"),
    ("content-type", b"application/x-not-json"),
    ("x" * 1000, b"\x00" * 4096),
]


def valid_document(door: str, **changes: Any) -> dict[str, Any]:
    """The door's valid example as a JSON document, with `changes` applied."""
    document: dict[str, Any] = json.loads(encode(examples()[DOORS[door].record]))
    document.update(changes)
    return document


def _json(document: object) -> bytes:
    return json.dumps(document).encode()


def corpus(door: str, now: float | None = None) -> list[Hostile]:
    """Every entry must be rejected at `door` (dead-lettered, never applied)."""
    now = time.time() if now is None else now
    d = DOORS[door]
    return [
        *_bytes_level(door),
        *_value_level(door),
        *_ids(door, d.id_field),
        *_times(door, d.time_field, now),
        *_envelopes(door),
    ]


def _bytes_level(door: str) -> list[Hostile]:
    valid = _json(valid_document(door))
    return [
        Hostile("empty value", b"k", b""),
        Hostile("null value (tombstone)", b"k\xff" if DOORS[door].table else b"k", None),
        Hostile("invalid utf-8", b"k", valid.replace(b'"', b'"\xff\xfe', 1)),
        Hostile("lone surrogate escape", b"k", valid.replace(b'"schema_version"', b'"\\ud800"')),
        Hostile("utf-8 bom", b"k", b"\xef\xbb\xbf" + valid),
        Hostile("nul bytes", b"k", b"\x00" * 64),
        Hostile("truncated json", b"k", valid[: len(valid) // 2]),
        Hostile("huge payload", b"k", valid[:-1] + b', "p": "' + b"x" * MAX_PAYLOAD_BYTES + b'"}'),
        Hostile("deeply nested arrays", b"k", b"[" * 100_000 + b"]" * 100_000),
        Hostile("deeply nested objects", b"k", b'{"a":' * 20_000 + b"1" + b"}" * 20_000),
        Hostile("json array", b"k", b"[" + valid + b"]"),
        Hostile("json string", b"k", b'"hello"'),
        Hostile("json null", b"k", b"null"),
        Hostile("json number overflow", b"k", b"1e999"),
        Hostile("binary noise", b"k", bytes(range(256)) * 4),
    ]


def _value_level(door: str) -> list[Hostile]:
    d = DOORS[door]
    document = valid_document(door)
    without_id = {k: v for k, v in document.items() if k != d.id_field}
    return [
        Hostile("NaN literal", b"k", _json(valid_document(door, **{d.time_field: float("nan")}))),
        Hostile(
            "Infinity literal", b"k", _json(valid_document(door, **{d.time_field: float("inf")}))
        ),
        Hostile("id as a number", b"k", _json(valid_document(door, **{d.id_field: 12345}))),
        Hostile("id as a list", b"k", _json(valid_document(door, **{d.id_field: ["a"]}))),
        Hostile("time as a string", b"k", _json(valid_document(door, **{d.time_field: "now"}))),
        Hostile("time as a boolean", b"k", _json(valid_document(door, **{d.time_field: True}))),
        Hostile("unknown schema version", b"k", _json(valid_document(door, schema_version=99))),
        Hostile("extra field", b"k", _json(valid_document(door, admin=True))),
        Hostile("missing id", b"k", _json(without_id)),
        Hostile("duplicate key, the last invalid", b"k", _json(document)[:-1] + (
            f', "{d.id_field}": "bad id"}}'.encode()
        )),
    ]


def _ids(door: str, field: str) -> list[Hostile]:
    bad = {
        "trailing newline": "id-1\n",
        "trailing crlf": "id-1\r\n",
        "leading newline": "\nid-1",
        "nul": "id\x00-1",
        "escape sequence": "id\x1b[31m-1",
        "tab": "id\t1",
        "space": "id 1",
        "delete": "id\x7f",
        "latin-1 letter": "idé",
        "right-to-left override": "id\u202e1",
        "next line (C1)": "id\x85",
        "emoji": "id\U0001f600",
        "empty": "",
        "too long": "i" * (MAX_ID_LENGTH + 1),
    }
    return [
        Hostile(f"id with {name}", b"k", _json(valid_document(door, **{field: value})))
        for name, value in bad.items()
    ]


def _times(door: str, field: str, now: float) -> list[Hostile]:
    bad = {
        "negative": -now,
        "zero": 0.0,
        "a duration, not a time": 3600.0,
        "milliseconds": now * 1000,
        "microseconds": now * 1e6,
        "1e18": 1e18,
        "a year ahead": now + 365 * 86400,
        "an hour ahead": now + 3600,
        "after 2100": 4_102_444_801.0,
    }
    return [
        Hostile(f"timestamp {name}", b"k", _json(valid_document(door, **{field: value})))
        for name, value in bad.items()
    ]


def _envelopes(door: str) -> list[Hostile]:
    invalid = _json(valid_document(door, admin=True))
    return [
        Hostile("no key", None, invalid),
        Hostile("binary key", b"\xff\x00\xfe" * 100, invalid),
        Hostile("huge key", b"k" * 100_000, invalid),
        Hostile("garbage headers", b"k", invalid, GARBAGE_HEADERS),
    ]
