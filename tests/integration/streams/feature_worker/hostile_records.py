"""Records no producer should send, one of each kind the contract must turn away."""

from __future__ import annotations

import json
import time

from schemas.limits import MAX_PAYLOAD_BYTES


def _valid(i: int) -> dict[str, object]:
    return {
        "event_id": f"bad-{i}",
        "user_id": f"u{i}",
        "session_id": f"u{i}-s1",
        "item_id": "i1",
        "event_type": "view",
        "timestamp": time.time() - 60,
    }


def _json(doc: object) -> bytes:
    return json.dumps(doc).encode()


def hostile_values() -> list[tuple[str, bytes | None]]:
    """(kind, value) pairs; every one must be dead-lettered."""
    now = time.time()
    return [
        ("malformed json", b'{"event_id": "x", "user_id": '),
        ("not an object", b"[1, 2, 3]"),
        ("unknown field", _json({**_valid(1), "admin": True})),
        ("nan timestamp", _json({**_valid(3), "timestamp": float("nan")})),
        ("infinite price", _json({**_valid(4), "context": {"price": float("inf")}})),
        ("negative timestamp", _json({**_valid(5), "timestamp": -5.0})),
        ("far-future timestamp", _json({**_valid(6), "timestamp": now + 30 * 86400})),
        ("oversized payload", _json({**_valid(7), "item_id": "i" * (MAX_PAYLOAD_BYTES + 10)})),
        ("invalid utf-8", _json(_valid(8)).replace(b'"u8"', b'"u\xff\xfe"')),
        ("deeply nested", b'{"context": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"),
        ("huge integer timestamp", _json({**_valid(9), "timestamp": 10**400})),
        ("huge integer id", _json({**_valid(10), "event_id": 10**40})),
        ("unknown event type", _json({**_valid(11), "event_type": "like"})),
        ("missing fields", _json({"event_id": "e"})),
        ("empty value", b""),
        ("null value", None),
        ("control characters in id", _json({**_valid(12), "user_id": "u\u0000x"})),
    ]
