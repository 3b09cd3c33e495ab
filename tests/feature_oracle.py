"""The reference implementation of apply.lua in plain Python, for tests and benchmarks only.

It applies positioned events one at a time to in-memory hashes, lists and sorted sets and yields
the state Redis must hold afterwards, in the same textual form (see `Snapshot`). It is written
from the definitions (streams/features/definitions.py and windows.py), not from the script, so a
disagreement points at a bug in one of the two.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from streams.feature_worker.batch import PositionedEvent, timestamp_text
from streams.features.definitions import (
    AFFINITY_WEIGHTS,
    POPULARITY_BUCKET_S,
    POPULARITY_BUCKETS,
    SEQUENCE_LENGTH,
    TIME_FORMAT,
    TYPE_CODES,
)
from streams.features.keys import FeatureKeys, popularity_shard
from streams.features.windows import HOURS, MINUTES, BucketFamily

KeyKind = Literal["hash", "list", "zset"]
Snapshot = dict[str, tuple[KeyKind, object]]
"""key -> ("hash", {field: text}) | ("list", [text, ...]) | ("zset", {member: score})."""


def _secs(value: float) -> str:
    return TIME_FORMAT % value


@dataclass
class _Event:
    partition: str
    offset: int
    user: str
    session: str
    item: str
    category: str
    code: str
    ts: float
    ts_text: str


@dataclass
class FeatureOracle:
    keys: FeatureKeys
    popularity_bucket_s: int = POPULARITY_BUCKET_S
    hashes: dict[str, dict[str, str]] = field(default_factory=dict)
    lists: dict[str, list[str]] = field(default_factory=dict)
    zsets: dict[str, dict[str, float]] = field(default_factory=dict)
    applied: int = 0
    skipped: int = 0

    def apply_all(self, events: Iterable[PositionedEvent]) -> None:
        for event in events:
            self.apply(event)

    def apply(self, positioned: PositionedEvent) -> None:
        e = positioned.event
        ctx = e.context
        event = _Event(
            partition=str(positioned.partition),
            offset=positioned.offset,
            user=e.user_id,
            session=e.session_id,
            item=e.item_id,
            category=ctx.category if ctx is not None and ctx.category else "",
            code=TYPE_CODES[e.event_type],
            ts=e.timestamp,
            ts_text=timestamp_text(e.timestamp),
        )
        if self._user(event):
            self.applied += 1
        else:
            self.skipped += 1
        self._session(event)
        self._item(event)
        if event.category:
            self._counted(self.keys.category(event.category), event)
        self._popularity(event)

    def snapshot(self) -> Snapshot:
        state: Snapshot = {k: ("hash", dict(v)) for k, v in self.hashes.items() if v}
        state.update({k: ("list", list(v)) for k, v in self.lists.items() if v})
        state.update({k: ("zset", dict(v)) for k, v in self.zsets.items() if v})
        return state

    def _claim(self, key: str, e: _Event) -> dict[str, str] | None:
        h = self.hashes.setdefault(key, {})
        applied = h.get(f"_p{e.partition}")
        if applied is not None and int(applied) >= e.offset:
            return None
        h[f"_p{e.partition}"] = str(e.offset)
        return h

    def _roll(self, key: str, h: dict[str, str], family: BucketFamily, ts: float) -> None:
        buckets = self.hashes.setdefault(f"{key}:{family.name}", {})
        bucket = family.bucket(ts)
        old = h.get(f"mx_{family.name}")
        newest = bucket if old is None else max(int(old), bucket)
        for stale in [b for b in buckets if int(b) <= newest - family.kept]:
            del buckets[stale]
        if bucket > newest - family.kept:
            buckets[str(bucket)] = str(int(buckets.get(str(bucket), "0")) + 1)
        h[f"mx_{family.name}"] = str(newest)

    def _counted(self, key: str, e: _Event) -> tuple[dict[str, str], float | None] | None:
        h = self._claim(key, e)
        if h is None:
            return None
        last = float(h["last_ts"]) if "last_ts" in h else None
        h[f"n_{e.code}"] = str(int(h.get(f"n_{e.code}", "0")) + 1)
        self._roll(key, h, MINUTES, e.ts)
        self._roll(key, h, HOURS, e.ts)
        if last is None or e.ts > last:
            h["last_ts"] = e.ts_text
        if "first_ts" not in h or e.ts < float(h["first_ts"]):
            h["first_ts"] = e.ts_text
        return h, last

    def _sequence(self, key: str, e: _Event) -> None:
        seq = self.lists.setdefault(key, [])
        seq.insert(0, f"{e.item} {e.ts_text} {e.code}")
        del seq[SEQUENCE_LENGTH:]

    def _user(self, e: _Event) -> bool:
        key = self.keys.user(e.user)
        purchased = self.hashes.get(key, {}).get("last_purchase_ts")
        counted = self._counted(key, e)
        if counted is None:
            return False
        h, last = counted
        if last is not None:
            h["prev_gap"] = _secs(max(0.0, e.ts - last))
        if e.code == "purchase" and (purchased is None or e.ts > float(purchased)):
            h["last_purchase_ts"] = e.ts_text
        if e.category:
            field_name = f"aff:{e.category}"
            h[field_name] = str(int(h.get(field_name, "0")) + AFFINITY_WEIGHTS[e.code])
        self._sequence(self.keys.user_sequence(e.user), e)
        return True

    def _session(self, e: _Event) -> None:
        key = self.keys.session(e.session)
        h = self._claim(key, e)
        if h is None:
            return
        h["user"] = e.user
        h["n"] = str(int(h.get("n", "0")) + 1)
        if "last_ts" in h:
            last = float(h["last_ts"])
            gap = max(0.0, e.ts - last)
            h["last_gap"] = _secs(gap)
            h["gap_sum"] = _secs(float(h.get("gap_sum", "0")) + gap)
            h["gap_max"] = _secs(max(float(h.get("gap_max", "0")), gap))
            if e.ts > last:
                h["last_ts"] = e.ts_text
            if e.ts < float(h["start_ts"]):
                h["start_ts"] = e.ts_text
        else:
            h["last_ts"] = h["start_ts"] = e.ts_text
        self._sequence(self.keys.session_sequence(e.session), e)

    def _item(self, e: _Event) -> None:
        key = self.keys.item(e.item)
        counted = self._counted(key, e)
        if counted is None or not e.category:
            return
        h, last = counted
        cat = h.get("cat")
        if cat is None or last is None or e.ts > last or (e.ts == last and e.category > cat):
            h["cat"] = e.category

    def _popularity(self, e: _Event) -> None:
        shard = popularity_shard(e.item)
        key = self.keys.popularity(shard)
        h = self._claim(key, e)
        if h is None:
            return
        h[f"n_{e.code}"] = str(int(h.get(f"n_{e.code}", "0")) + 1)
        bucket = math.floor(e.ts / self.popularity_bucket_s)
        newest = bucket if "mx_h" not in h else max(int(h["mx_h"]), bucket)
        h["mx_h"] = str(newest)
        for stale in [k for k in self.zsets if k.startswith(f"{key}:h")]:
            if int(stale.rsplit(":h", 1)[1]) <= newest - POPULARITY_BUCKETS:
                del self.zsets[stale]
        if bucket > newest - POPULARITY_BUCKETS:
            zset = self.zsets.setdefault(self.keys.popularity_bucket(shard, bucket), {})
            zset[e.item] = zset.get(e.item, 0.0) + 1.0
