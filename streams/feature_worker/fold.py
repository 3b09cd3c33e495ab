"""Each entity's share of a batch, folded in Python into the one update apply.lua merges.

Redis spends its time on Lua work per event, not on the commands (`streamrec bench script`), so
the events are folded here, where a worker's CPU scales out, and Redis merges one summary per
entity with what it stores: counter deltas, bucket counts, extreme times, the newest sequence
entries. What depends on the stored state event by event (a session's gaps, an item's newest
category) travels as the few values the merge loops over.

Idempotence stays in Redis: an update names, per source partition, the first and last offset it
folds and, for a later piece of the same entity in the same batch, the offset the piece before it
ends at. Redis merges it only if none of it was applied, skips it if all was, and otherwise
refuses it untouched: the writer then sends those events one update each (see writer.py).

An update's values travel as MessagePack (writer.py): numbers as numbers, what Redis stores
verbatim (times, ids, categories, sequence entries) as text in its canonical form, and each list
(partitions, counters, buckets, times, sequence entries) as an array Redis unpacks into a Lua
table, so the script reads an update without a loop of its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from streams.feature_worker.batch import PositionedEvent, entered_ms, timestamp_text
from streams.features.definitions import (
    AFFINITY_WEIGHTS,
    POPULARITY_BUCKET_S,
    SEQUENCE_LENGTH,
    TYPE_CODES,
)
from streams.features.keys import FeatureKeys, popularity_shard
from streams.features.layout import (
    SESSION_EVENTS,
    affinity_field,
    applied_field,
    counter_field,
)

Value = str | int | Sequence["Value"]
"""An update value: a count, offset, bucket or ms as a number, anything stored as text, or a
list of values."""


class EntityUpdate(NamedTuple):
    """One entity's part of a script call: its folded events, in stream order (a named tuple: a
    batch builds thousands)."""

    kind: str
    """u (user), s (session), i (item), c (category) or p (a popularity shard)."""
    key: str
    values: tuple[Value, ...]
    """What apply.lua reads of this entity, in its order."""
    events: tuple[PositionedEvent, ...]


class _Row(NamedTuple):
    """What the folds need of an event, computed once per batch (an event serves 4-5 entities)."""

    item: PositionedEvent
    partition: int
    offset: int
    ts: float
    ts_s: str
    code: str
    category: str
    minute: int
    hour: int
    popularity_bucket: int
    parts: tuple[tuple[str, int, int, int]]
    """The partition list of an update of this event alone (see apply.lua)."""


NOT_EXPECTED = -1
"""The expected applied offset of a partition no earlier piece of the batch covered."""


def _applied_field(partition: int) -> str:
    """The entity hash's field holding the last offset of `partition` it applied."""
    return _APPLIED_FIELDS.get(partition) or applied_field(partition)


_APPLIED_FIELDS = {p: applied_field(p) for p in range(256)}


def _row(item: PositionedEvent, popularity_bucket_s: int) -> _Row:
    e = item.event
    ctx = e.context
    ts = e.timestamp
    offset = item.offset
    return _Row(
        item, item.partition, offset, ts, timestamp_text(ts), TYPE_CODES[e.event_type],
        ctx.category if ctx is not None and ctx.category else "",
        math.floor(ts / 60), math.floor(ts / 3600), math.floor(ts / popularity_bucket_s),
        ((_applied_field(item.partition), offset, offset, NOT_EXPECTED),),
    )


def _single(kind: str, row: _Row) -> tuple[Value, ...]:
    """The update of one event: what `_common` + `_specific` give for it, built directly (most
    users and sessions of interleaved traffic have one event per batch)."""
    e = row.item.event
    ts_s, code, parts = row.ts_s, row.code, row.parts
    counter = (_COUNTER[code], 1)
    minute, hour = (row.minute, 1), (row.hour, 1)
    if kind == "u":
        counters = (
            (_COUNTER[code], 1, affinity_field(row.category), AFFINITY_WEIGHTS[code])
            if row.category else counter
        )
        return (
            parts, counters, minute, hour, ts_s, "", ts_s, ts_s,
            ts_s if code == "purchase" else "", entered_ms(row.item),
            (f"{e.item_id} {ts_s} {code}",),
        )
    if kind == "s":
        return (parts, (SESSION_EVENTS, 1), e.user_id, (ts_s,), (f"{e.item_id} {ts_s} {code}",))
    if kind == "i":
        return (parts, counter, minute, hour, ts_s, (ts_s, row.category))
    if kind == "c":
        return (parts, counter, minute, hour, ts_s, ts_s)
    bucket = row.popularity_bucket
    return (parts, counter, bucket, (bucket, e.item_id, 1))


def _extreme(rows: Sequence[_Row], newest: bool) -> str:
    """The time text of the first row (in stream order) with the greatest or least time."""
    best = rows[0]
    for row in rows:
        if (row.ts > best.ts) if newest else (row.ts < best.ts):
            best = row
    return best.ts_s


_COUNTER = {code: counter_field(code) for code in TYPE_CODES.values()}
"""The counter field of each event type."""


def _pairs(counts: dict[str, int] | dict[int, int]) -> list[Value]:
    """Name or bucket, then count, for each."""
    flat: list[Value] = []
    for name, n in counts.items():
        flat += (name, n)
    return flat


def _sequence(rows: Sequence[_Row]) -> list[Value]:
    return [f"{r.item.event.item_id} {r.ts_s} {r.code}" for r in rows[-SEQUENCE_LENGTH:]]


def _common(kind: str, rows: Sequence[_Row], expect: dict[int, int]) -> list[Value]:
    """Partitions (applied field, first, last, expected applied offset), counter deltas, and
    for windowed kinds the minute and hour bucket counts."""
    spans: dict[int, list[int]] = {}
    for row in rows:
        span = spans.get(row.partition)
        if span is None:
            spans[row.partition] = [row.offset, row.offset]
        else:
            span[1] = row.offset
    parts: list[Value] = [
        (_applied_field(partition), first, last, expect.get(partition, NOT_EXPECTED))
        for partition, (first, last) in spans.items()
    ]
    counters: dict[str, int] = {SESSION_EVENTS: len(rows)} if kind == "s" else {}
    if kind != "s":
        # Plain loops, not Counter: most groups hold a few events, where its set-up dominates.
        for row in rows:
            name = _COUNTER[row.code]
            counters[name] = counters.get(name, 0) + 1
    if kind == "u":
        for row in rows:
            if row.category:
                name = affinity_field(row.category)
                counters[name] = counters.get(name, 0) + AFFINITY_WEIGHTS[row.code]
    common: list[Value] = [parts, _pairs(counters)]
    if kind in "uic":
        minutes: dict[int, int] = {}
        hours: dict[int, int] = {}
        for row in rows:
            minutes[row.minute] = minutes.get(row.minute, 0) + 1
            hours[row.hour] = hours.get(row.hour, 0) + 1
        common += (_pairs(minutes), _pairs(hours))
    return common


def _specific(kind: str, rows: Sequence[_Row]) -> list[Value]:
    last = rows[-1]
    if kind == "u":
        purchases = [r for r in rows if r.code == "purchase"]
        return [
            last.ts_s,
            _extreme(rows[:-1], newest=True) if len(rows) > 1 else "",
            _extreme(rows, newest=True),
            _extreme(rows, newest=False),
            _extreme(purchases, newest=True) if purchases else "",
            entered_ms(last.item),
            _sequence(rows),
        ]
    if kind == "s":
        return [last.item.event.user_id, [r.ts_s for r in rows], _sequence(rows)]
    if kind == "i":
        events: list[Value] = []
        for row in rows:
            events += (row.ts_s, row.category)
        return [_extreme(rows, newest=False), events]
    if kind == "c":
        return [_extreme(rows, newest=True), _extreme(rows, newest=False)]
    buckets: dict[tuple[int, str], int] = {}
    for row in rows:
        key = (row.popularity_bucket, row.item.event.item_id)
        buckets[key] = buckets.get(key, 0) + 1
    counts: list[Value] = []
    for (bucket, item_id), n in buckets.items():
        counts += (bucket, item_id, n)
    return [max(bucket for bucket, _ in buckets), counts]


def _fold(kind: str, key: str, rows: Sequence[_Row], expect: dict[int, int]) -> EntityUpdate:
    values = _common(kind, rows, expect) + _specific(kind, rows)
    return EntityUpdate(kind, key, tuple(values), tuple(r.item for r in rows))


def fold(
    kind: str, key: str, events: Sequence[PositionedEvent], expect: dict[int, int] | None = None,
    popularity_bucket_s: int = POPULARITY_BUCKET_S,
) -> EntityUpdate:
    """`events` (one entity's, in stream order) as one update; `expect`: per partition, the last
    offset of this entity's previous piece of the same batch."""
    rows = [_row(item, popularity_bucket_s) for item in events]
    return _fold(kind, key, rows, expect or {})


def _increasing(rows: Sequence[_Row]) -> bool:
    newest: dict[int, int] = {}
    for row in rows:
        if newest.get(row.partition, -1) >= row.offset:
            return False
        newest[row.partition] = row.offset
    return True


def entity_updates(
    keys: FeatureKeys, batch: Sequence[PositionedEvent], max_events: int,
    popularity_bucket_s: int = POPULARITY_BUCKET_S,
) -> Iterator[EntityUpdate]:
    """The batch grouped per entity, each entity's events kept in stream order and cut into
    pieces of at most `max_events` (the bound on how long one call holds Redis). The grouping
    happens at once; each update is folded as it is taken, so the writer can send the first
    ones to Redis while the next are folded.

    Entities never read each other's state, so applying entity by entity is the same as
    applying the events one at a time; only the order within an entity matters. An entity
    whose offsets go back within the batch (a re-delivery spliced into it) gets one update per
    event, which Redis applies or skips one by one."""
    # Grouped by id per kind, without building a key per event; popularity shards from each
    # distinct item's shard, in a second pass that keeps the stream order.
    rows = [_row(item, popularity_bucket_s) for item in batch]
    users: dict[str, list[_Row]] = {}
    sessions: dict[str, list[_Row]] = {}
    items: dict[str, list[_Row]] = {}
    categories: dict[str, list[_Row]] = {}
    for row in rows:
        e = row.item.event
        for ids, entity in ((users, e.user_id), (sessions, e.session_id), (items, e.item_id)):
            group = ids.get(entity)
            if group is None:
                ids[entity] = [row]
            else:
                group.append(row)
        if row.category:
            group = categories.get(row.category)
            if group is None:
                categories[row.category] = [row]
            else:
                group.append(row)
    shard_of = {item_id: popularity_shard(item_id) for item_id in items}
    shards: dict[int, list[_Row]] = {}
    for row in rows:
        shards.setdefault(shard_of[row.item.event.item_id], []).append(row)
    groups: list[tuple[str, str, list[_Row]]] = [
        *(("u", keys.user(entity), g) for entity, g in users.items()),
        *(("s", keys.session(entity), g) for entity, g in sessions.items()),
        *(("i", keys.item(entity), g) for entity, g in items.items()),
        *(("c", keys.category(entity), g) for entity, g in categories.items()),
        *(("p", keys.popularity(shard), g) for shard, g in shards.items()),
    ]
    return _folds(groups, max_events)


def _folds(groups: list[tuple[str, str, list[_Row]]], max_events: int) -> Iterator[EntityUpdate]:
    for kind, key, rows in groups:
        if len(rows) == 1:
            yield EntityUpdate(kind, key, _single(kind, rows[0]), (rows[0].item,))
        elif not _increasing(rows):
            yield from (_fold(kind, key, [row], {}) for row in rows)
        else:
            expect: dict[int, int] = {}
            for start in range(0, len(rows), max_events):
                piece = rows[start : start + max_events]
                yield _fold(kind, key, piece, dict(expect))
                expect.update((row.partition, row.offset) for row in piece)
