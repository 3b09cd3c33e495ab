"""Reading the feature writer's Redis state back, in the oracle's form or as raw DUMPs."""

from __future__ import annotations

import zlib
from typing import cast

import redis

from tests.feature_oracle import Snapshot


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


WALL_CLOCK_FIELDS = frozenset({"lag_ms", "ttl_from_ms"})
"""A user's `lag_ms` (the writer's clock minus the newest event's entry time) and a user's or
session's `ttl_from_ms` (the writer's clock when its expiry time was set): wall-clock, the only
fields the events do not determine, so neither the oracle nor a second run can reproduce them.
They are left out of the state compared, and only they."""


def read_state(client: redis.Redis, prefix: str) -> Snapshot:
    """Every key under `prefix` in the oracle's form, without the WALL_CLOCK_FIELDS."""
    state: Snapshot = {}
    for raw_key in client.scan_iter(match=f"{prefix}*", count=1000):
        key = _text(raw_key)
        kind = _text(client.type(raw_key))
        if kind == "hash":
            fields = cast(dict[bytes, bytes], client.hgetall(raw_key))
            texts = {_text(f): _text(v) for f, v in fields.items()}
            state[key] = ("hash", {f: v for f, v in texts.items() if f not in WALL_CLOCK_FIELDS})
        elif kind == "list":
            values = cast(list[bytes], client.lrange(raw_key, 0, -1))
            state[key] = ("list", [_text(v) for v in values])
        elif kind == "zset":
            pairs = cast(list[tuple[bytes, float]], client.zrange(raw_key, 0, -1, withscores=True))
            state[key] = ("zset", {_text(m): float(s) for m, s in pairs})
        else:
            raise AssertionError(f"unexpected {kind} key {key}")
    return state


def dump_state(client: redis.Redis, prefix: str) -> dict[bytes, int]:
    """Every key's DUMP (its exact serialised value), as a checksum per key."""
    return {
        key: zlib.crc32(client.dump(key) or b"")
        for key in client.scan_iter(match=f"{prefix}*", count=1000)
    }


def differences(actual: Snapshot, expected: Snapshot, limit: int = 5) -> list[str]:
    """Human-readable differences (empty when equal), to keep assertion messages short."""
    diffs = [f"missing {k}" for k in sorted(expected.keys() - actual.keys())]
    diffs += [f"unexpected {k}" for k in sorted(actual.keys() - expected.keys())]
    for key in sorted(expected.keys() & actual.keys()):
        if actual[key] != expected[key]:
            diffs.append(f"{key}: redis={actual[key]!r:.300} oracle={expected[key]!r:.300}")
    return diffs[:limit] + ([f"... {len(diffs) - limit} more"] if len(diffs) > limit else [])
