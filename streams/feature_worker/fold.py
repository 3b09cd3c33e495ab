"""Each entity's share of a batch, folded in Python into the one update apply.lua merges.

Redis spends its time on Lua work per event, not on the commands (`streamrec bench script`), so
the events are folded here, where a worker's CPU scales out, and Redis merges one summary per
entity with what it stores: counter deltas, bucket counts, extreme times, the newest sequence
entries. What depends on the stored state event by event (a session's gaps, an item's newest
category) travels as the few values the merge loops over.

The fold works on the batch as columns (numpy arrays, one value per event, in stream order):
each event's fields are read once, each kind's entities are grouped by one stable sort, and the
counts, bucket counts and extreme times of every entity come from whole-array reductions, so
the Python left per event is a few reads and one sequence text, and per entity the building of
its update.

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

import itertools
from collections.abc import Iterator, Sequence
from operator import attrgetter, itemgetter
from typing import NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from streams.feature_worker.batch import PositionedEvent, entered_ms, timestamp_texts
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

T = TypeVar("T")
Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


class EntityUpdate(NamedTuple):
    """One entity's part of a script call: its folded events, in stream order (a named tuple: a
    batch builds thousands)."""

    kind: str
    """u (user), s (session), i (item), c (category) or p (a popularity shard)."""
    key: str
    values: tuple[Value, ...]
    """What apply.lua reads of this entity, in its order."""
    events: tuple[PositionedEvent, ...]


NOT_EXPECTED = -1
"""The expected applied offset of a partition no earlier piece of the batch covered."""

_CODES = tuple(TYPE_CODES.values())
"""Event-type codes in the funnel's order; a column holds each event's index in it."""
_CODE_INDEX = {event_type: n for n, event_type in enumerate(TYPE_CODES)}
_COUNTERS = tuple(counter_field(code) for code in _CODES)
_WEIGHTS = np.array([AFFINITY_WEIGHTS[code] for code in _CODES], dtype=np.int64)
_PURCHASE = _CODES.index("purchase")
_APPLIED_FIELDS = tuple(applied_field(p) for p in range(256))


def _applied_field(partition: int) -> str:
    """The entity hash's field holding the last offset of `partition` it applied."""
    return _APPLIED_FIELDS[partition] if partition < len(_APPLIED_FIELDS) else (
        applied_field(partition)
    )


_EVENT = attrgetter("event")
_TIMESTAMP = attrgetter("timestamp")
_EVENT_TYPE = attrgetter("event_type")
_USER = attrgetter("user_id")
_SESSION = attrgetter("session_id")
_ITEM = attrgetter("item_id")
_PARTITION = attrgetter("partition")
_OFFSET = attrgetter("offset")


class _Columns:
    """The batch's events as columns, in stream order: what every kind's fold reads."""

    def __init__(self, batch: Sequence[PositionedEvent], popularity_bucket_s: int) -> None:
        # map() with attrgetter: the reads run in C, without a comprehension's bytecode per item.
        events = list(map(_EVENT, batch))
        ts: list[float] = list(map(_TIMESTAMP, events))
        types = list(map(_EVENT_TYPE, events))
        codes = list(map(TYPE_CODES.__getitem__, types))
        self.batch = batch
        self.users: list[str] = list(map(_USER, events))
        self.sessions: list[str] = list(map(_SESSION, events))
        self.items: list[str] = list(map(_ITEM, events))
        self.categories = [
            (context.category or "") if (context := e.context) is not None else ""
            for e in events
        ]
        self.ts_s = timestamp_texts(ts)
        self.entries = [
            f"{item} {ts_s} {code}"
            for item, ts_s, code in zip(self.items, self.ts_s, codes, strict=True)
        ]
        """Each event's sequence entry (`item ts type`)."""
        self.ts: Floats = np.array(ts, dtype=np.float64)
        self.code: Ints = np.array(list(map(_CODE_INDEX.__getitem__, types)), dtype=np.int64)
        self.partition: Ints = np.array(list(map(_PARTITION, batch)), dtype=np.int64)
        self.offset: Ints = np.array(list(map(_OFFSET, batch)), dtype=np.int64)
        self.text = dict(zip(ts, self.ts_s, strict=True))
        """The time text of each time in the batch (an extreme time is one of them)."""
        self.user_group, self.user_ids = _group_codes(self.users)
        self.session_group, self.session_ids = _group_codes(self.sessions)
        self.item_group, self.item_ids = _group_codes(self.items)
        self.category_group, self.category_ids = _group_codes(self.categories)
        if "" in self.category_ids:  # events without a category: group -1, in no category's
            blank = self.category_ids.index("")
            self.category_group = np.where(
                self.category_group == blank, -1,
                self.category_group - (self.category_group > blank),
            )
            self.category_ids.remove("")
        self.minute: Ints = np.floor(self.ts / 60).astype(np.int64)
        self.hour: Ints = np.floor(self.ts / 3600).astype(np.int64)
        self.popularity_bucket: Ints = np.floor(self.ts / popularity_bucket_s).astype(np.int64)

    def increasing(self) -> bool:
        """Whether every partition's offsets increase through the batch (no re-delivery
        spliced into it): then so do those of every entity's events."""
        order = np.argsort(self.partition, kind="stable")
        partition, offset = self.partition[order], self.offset[order]
        same = partition[1:] == partition[:-1]
        return bool(np.all(offset[1:][same] > offset[:-1][same]))

    def going_back(self, groups: Ints) -> Ints:
        """The groups whose events' offsets go back within a partition."""
        n = len(groups)
        order = np.lexsort((np.arange(n), self.partition, groups))
        group, partition, offset = groups[order], self.partition[order], self.offset[order]
        back = (group[1:] == group[:-1]) & (partition[1:] == partition[:-1]) & (
            offset[1:] <= offset[:-1]
        )
        return np.unique(group[1:][back])


def _changes(*columns: Ints) -> npt.NDArray[np.bool_]:
    """Where any of the columns (of equal length) differs from the value before it; the first
    position always. Built in place: on a small batch, numpy's per-call overhead is most of the
    fold."""
    changed = np.empty(len(columns[0]), dtype=np.bool_)
    if len(changed):
        changed[0] = True
        np.not_equal(columns[0][1:], columns[0][:-1], out=changed[1:])
        for column in columns[1:]:
            changed[1:] |= column[1:] != column[:-1]
    return changed


def _lengths(starts: Ints, n: int) -> Ints:
    """The lengths of the runs starting at `starts` (increasing) in `n` positions."""
    lengths = np.empty_like(starts)
    lengths[:-1] = starts[1:] - starts[:-1]
    lengths[-1:] = n - starts[-1:]
    return lengths


def _group_codes(ids: list[str]) -> tuple[Ints, list[str]]:
    """Each event's group number (groups numbered in order of first appearance), and the ids."""
    index = dict.fromkeys(ids, 0)
    for n, entity in enumerate(index):
        index[entity] = n
    return np.array(list(map(index.__getitem__, ids)), dtype=np.int64), list(index)


class _Segments:
    """One kind's events sorted by entity (stream order within each; events of group -1 left
    out), cut into the pieces that become updates: at most `max_events` events, or one event
    each for an entity whose offsets go back within the batch (`split`)."""

    def __init__(self, groups: Ints, max_events: int, split: Ints | None) -> None:
        order = np.argsort(groups, kind="stable")
        self.order: Ints = order[np.searchsorted(groups[order], 0) :]
        n = len(self.order)
        grouped = groups[self.order]
        group_starts = _changes(grouped).nonzero()[0]
        position = np.arange(n) - np.repeat(group_starts, _lengths(group_starts, n))
        starts = position % max_events == 0
        if split is not None and len(split):
            starts |= np.isin(grouped, split)
        self.starts: Ints = starts.nonzero()[0]
        self.ends: Ints = self.starts + _lengths(self.starts, n)
        self.group: Ints = grouped[self.starts]
        self.row_segment: Ints = np.cumsum(starts) - 1
        """Each sorted event's segment."""
        continued = ~_changes(self.group)
        if split is not None and len(split):
            continued &= ~np.isin(self.group, split)
        self.continued: list[bool] = continued.tolist()
        """Whether a segment is a later piece of the entity of the segment before it."""

    def sorted(self, column: Ints) -> Ints:
        return column[self.order]

    def sorted_floats(self, column: Floats) -> Floats:
        return column[self.order]

    def runs(self, values: Ints, weights: Ints | None = None) -> tuple[Ints, Ints, list[int]]:
        """Per segment, its distinct `values` (a sorted column) in increasing order with their
        event counts (or summed `weights`): the values and counts of every segment's runs, one
        after another, and where each segment's runs start (one more bound than segments)."""
        order = self.by_segment_then(values)
        segment, value = self.row_segment[order], values[order]
        starts = _changes(segment, value).nonzero()[0]
        if weights is None:
            totals = _lengths(starts, len(order))
        else:
            totals = np.add.reduceat(weights[order], starts)
        bounds = np.searchsorted(segment[starts], np.arange(len(self.starts) + 1))
        return value[starts], totals, bounds.tolist()

    def by_segment_then(self, values: Ints) -> Ints:
        """The sorted events' order by segment, then by `values`: one sort of a single key
        (segment, value) where it fits in 63 bits, as it does for any real batch."""
        low = int(values.min())
        span = int(values.max()) - low + 1
        if span * (len(self.starts) + 1) >= 2**62:
            return np.lexsort((values, self.row_segment))
        key = self.row_segment * span + (values - low)
        order: Ints = np.argsort(key)
        return order

    def extreme(self, column: Floats, newest: bool) -> list[float]:
        """Each segment's greatest (or least) value of a sorted column."""
        reduce = np.maximum if newest else np.minimum
        found: list[float] = reduce.reduceat(column, self.starts).tolist()
        return found


def _flat(*columns: Sequence[Value]) -> list[Value]:
    """The columns interleaved: a0, b0, a1, b1, ..."""
    return list(itertools.chain.from_iterable(zip(*columns, strict=True)))


class _Fold:
    """One kind's updates from the batch's columns."""

    def __init__(
        self, columns: _Columns, kind: str, groups: Ints, max_events: int, split: Ints | None
    ) -> None:
        self.columns = columns
        self.kind = kind
        self.segments = _Segments(groups, max_events, split)
        self.order: list[int] = self.segments.order.tolist()
        """Batch positions of the kind's events, sorted by entity."""

    def updates(
        self, keys: Sequence[str], first_expect: dict[int, int] | None = None
    ) -> Iterator[EntityUpdate]:
        """Each segment's update; `first_expect` (one entity's events alone): per partition,
        the last offset of this entity's previous piece of the same batch."""
        segments, kind = self.segments, self.kind
        events = self.sorted(self.columns.batch)
        spans, plain = self._spans()
        common = self._common()
        specific = _SPECIFIC[kind](self)
        continued = segments.continued
        last_segment = len(continued) - 1
        expect: dict[int, int] = {}
        for n, (start, end, group) in enumerate(
            zip(
                segments.starts.tolist(), segments.ends.tolist(), segments.group.tolist(),
                strict=True,
            )
        ):
            if not continued[n]:
                expect = dict(first_expect) if first_expect else {}
            parts = plain[n] if not expect else [
                (_applied_field(p), first, last, expect.get(p, NOT_EXPECTED))
                for p, first, last in spans[n]
            ]
            if n < last_segment and continued[n + 1]:
                expect.update((p, last) for p, _, last in spans[n])
            yield EntityUpdate(
                kind, keys[group], (parts, *common[n], *specific(start, end, n)),
                tuple(events[start:end]),
            )

    def sorted(self, column: Sequence[T]) -> Sequence[T]:
        """A column's values of the kind's events, sorted by entity (itemgetter: in C)."""
        if len(self.order) == 1:
            return (column[self.order[0]],)
        picked: tuple[T, ...] = itemgetter(*self.order)(column)
        return picked

    def _spans(self) -> tuple[list[list[tuple[int, int, int]]], list[list[Value]]]:
        """Per segment, per partition: (partition, first offset, last offset); and the same as
        an update's partitions when no earlier piece is expected."""
        segments = self.segments
        partition = segments.sorted(self.columns.partition)
        offset = segments.sorted(self.columns.offset)
        order = segments.by_segment_then(partition)
        segment, partition, offset = segments.row_segment[order], partition[order], offset[order]
        starts = _changes(segment, partition).nonzero()[0]
        spans: list[list[tuple[int, int, int]]] = [[] for _ in segments.continued]
        for s, p, first, last in zip(
            segment[starts].tolist(), partition[starts].tolist(),
            np.minimum.reduceat(offset, starts).tolist(),
            np.maximum.reduceat(offset, starts).tolist(), strict=True,
        ):
            spans[s].append((p, first, last))
        plain: list[list[Value]] = [
            [(_applied_field(p), first, last, NOT_EXPECTED) for p, first, last in span]
            for span in spans
        ]
        return spans, plain

    def _common(self) -> list[list[Value]]:
        """Per segment: counter deltas and, for windowed kinds, minute and hour bucket counts."""
        segments, columns, kind = self.segments, self.columns, self.kind
        count = len(segments.continued)
        if kind == "s":
            sizes = (segments.ends - segments.starts).tolist()
            return [[(SESSION_EVENTS, size)] for size in sizes]
        code = segments.sorted(columns.code)
        run_code, run_count, bounds = segments.runs(code)
        flat = _flat([_COUNTERS[c] for c in run_code.tolist()], run_count.tolist())
        counters = [flat[2 * bounds[n] : 2 * bounds[n + 1]] for n in range(count)]
        if kind == "u":
            self._add_affinities(counters, code)
        if kind not in "uic":
            return [[c] for c in counters]
        minutes = self._buckets(columns.minute)
        hours = self._buckets(columns.hour)
        return [[counters[n], minutes[n], hours[n]] for n in range(count)]

    def _add_affinities(self, counters: list[list[Value]], code: Ints) -> None:
        """A user's affinity deltas per category after its counters (events without a category
        add none)."""
        columns, segments = self.columns, self.segments
        category = segments.sorted(columns.category_group)
        if not np.any(category >= 0):
            return
        weights = np.where(category >= 0, _WEIGHTS[code], 0)
        run_category, run_weight, bounds = segments.runs(category, weights)
        fields = [affinity_field(name) for name in columns.category_ids]
        named = run_category.tolist()
        weight = run_weight.tolist()
        for s, counter in enumerate(counters):
            for n in range(bounds[s], bounds[s + 1]):
                if named[n] >= 0:
                    counter.extend((fields[named[n]], weight[n]))

    def _buckets(self, column: Ints) -> list[list[Value]]:
        run_bucket, run_count, bounds = self.segments.runs(self.segments.sorted(column))
        flat = _flat(run_bucket.tolist(), run_count.tolist())
        return [flat[2 * bounds[n] : 2 * bounds[n + 1]] for n in range(len(bounds) - 1)]


class _Specific:
    """A kind's own values of one segment (sorted positions start..end), after the common ones."""

    def __init__(self, fold: _Fold) -> None:
        self.segments = fold.segments
        self.order = fold.order
        self.columns = fold.columns
        self.fold = fold

    def __call__(self, start: int, end: int, segment: int) -> list[Value]:
        raise NotImplementedError

    def times(self) -> Floats:
        return self.segments.sorted_floats(self.columns.ts)

    def texts(self, column: Floats, newest: bool) -> list[str]:
        """Each segment's greatest (or least) time of `column` (sorted) as its text; "" where
        it is minus infinity (no event counted)."""
        text = self.columns.text
        return [text.get(t, "") for t in self.segments.extreme(column, newest)]


class _User(_Specific):
    """Newest event's time, the newest before it, newest and oldest, newest purchase, the
    newest event's entered time, the newest sequence entries."""

    def __init__(self, fold: _Fold) -> None:
        super().__init__(fold)
        segments, ts = self.segments, self.times()
        self.newest = self.texts(ts, newest=True)
        self.oldest = self.texts(ts, newest=False)
        earlier = ts.copy()
        earlier[segments.ends - 1] = -np.inf  # each segment's last event left out
        self.earlier = self.texts(earlier, newest=True)
        purchased = segments.sorted(self.columns.code) == _PURCHASE
        self.purchase = self.texts(np.where(purchased, ts, -np.inf), newest=True)
        self.ts_s = self.fold.sorted(self.columns.ts_s)
        self.entries = self.fold.sorted(self.columns.entries)

    def __call__(self, start: int, end: int, segment: int) -> list[Value]:
        return [
            self.ts_s[end - 1],
            self.earlier[segment],
            self.newest[segment],
            self.oldest[segment],
            self.purchase[segment],
            entered_ms(self.columns.batch[self.order[end - 1]]),
            self.entries[max(start, end - SEQUENCE_LENGTH) : end],
        ]


class _Session(_Specific):
    """The user of its newest event, every event's time, the newest sequence entries."""

    def __init__(self, fold: _Fold) -> None:
        super().__init__(fold)
        self.ts_s = self.fold.sorted(self.columns.ts_s)
        self.entries = self.fold.sorted(self.columns.entries)

    def __call__(self, start: int, end: int, segment: int) -> list[Value]:
        return [
            self.columns.users[self.order[end - 1]],
            self.ts_s[start:end],
            self.entries[max(start, end - SEQUENCE_LENGTH) : end],
        ]


class _Item(_Specific):
    """The oldest time, and every event's time and category."""

    def __init__(self, fold: _Fold) -> None:
        super().__init__(fold)
        self.oldest = self.texts(self.times(), newest=False)
        self.events = _flat(
            self.fold.sorted(self.columns.ts_s), self.fold.sorted(self.columns.categories)
        )

    def __call__(self, start: int, end: int, segment: int) -> list[Value]:
        return [self.oldest[segment], self.events[2 * start : 2 * end]]


class _Category(_Specific):
    """The newest and oldest time."""

    def __init__(self, fold: _Fold) -> None:
        super().__init__(fold)
        ts = self.times()
        self.newest = self.texts(ts, newest=True)
        self.oldest = self.texts(ts, newest=False)

    def __call__(self, start: int, end: int, segment: int) -> list[Value]:
        return [self.newest[segment], self.oldest[segment]]


class _Popularity(_Specific):
    """The newest bucket, and each (bucket, item)'s count, bucket by bucket."""

    def __init__(self, fold: _Fold) -> None:
        super().__init__(fold)
        segments, columns = self.segments, self.columns
        bucket = segments.sorted(columns.popularity_bucket)
        base, items = int(bucket.min()), len(columns.item_ids)
        # One number per (bucket, item), bucket-major, so a segment's runs go bucket by bucket.
        pairs, counts, self.bounds = segments.runs(
            (bucket - base) * items + segments.sorted(columns.item_group)
        )
        names = columns.item_ids
        self.counts = _flat(
            (pairs // items + base).tolist(),
            [names[n] for n in (pairs % items).tolist()],
            counts.tolist(),
        )
        self.newest: list[int] = np.maximum.reduceat(bucket, segments.starts).tolist()

    def __call__(self, start: int, end: int, segment: int) -> list[Value]:
        return [
            self.newest[segment],
            self.counts[3 * self.bounds[segment] : 3 * self.bounds[segment + 1]],
        ]


_SPECIFIC: dict[str, type[_Specific]] = {
    "u": _User, "s": _Session, "i": _Item, "c": _Category, "p": _Popularity,
}


def fold(
    kind: str, key: str, events: Sequence[PositionedEvent], expect: dict[int, int] | None = None,
    popularity_bucket_s: int = POPULARITY_BUCKET_S,
) -> EntityUpdate:
    """`events` (one entity's, in stream order) as one update; `expect`: per partition, the last
    offset of this entity's previous piece of the same batch."""
    columns = _Columns(events, popularity_bucket_s)
    groups = np.zeros(len(events), dtype=np.int64)
    (update,) = _Fold(columns, kind, groups, len(events), None).updates([key], expect)
    return update


def entity_updates(
    keys: FeatureKeys, batch: Sequence[PositionedEvent], max_events: int,
    popularity_bucket_s: int = POPULARITY_BUCKET_S,
) -> Iterator[EntityUpdate]:
    """The batch grouped per entity, each entity's events kept in stream order and cut into
    pieces of at most `max_events` (the bound on how long one call holds Redis). The columns
    are read at once; each kind is folded as it is taken, so the writer can send the first
    kinds' updates to Redis while the next are folded.

    Entities never read each other's state, so applying entity by entity is the same as
    applying the events one at a time; only the order within an entity matters. An entity
    whose offsets go back within the batch (a re-delivery spliced into it) gets one update per
    event, which Redis applies or skips one by one."""
    if not batch:
        return iter(())
    return _kinds(keys, _Columns(batch, popularity_bucket_s), max_events)


def _kinds(keys: FeatureKeys, columns: _Columns, max_events: int) -> Iterator[EntityUpdate]:
    going_back = not columns.increasing()
    shard_of = np.array([popularity_shard(item) for item in columns.item_ids], dtype=np.int64)
    kinds = (
        ("u", columns.user_group, [keys.user(entity) for entity in columns.user_ids]),
        ("s", columns.session_group, [keys.session(entity) for entity in columns.session_ids]),
        ("i", columns.item_group, [keys.item(entity) for entity in columns.item_ids]),
        ("c", columns.category_group, [keys.category(c) for c in columns.category_ids]),
        ("p", shard_of[columns.item_group], keys.popularity_shards()),
    )
    for kind, groups, entity_keys in kinds:
        if not entity_keys:
            continue  # no event of the batch has a category
        split = columns.going_back(groups) if going_back else None
        yield from _Fold(columns, kind, groups, max_events, split).updates(entity_keys)
