"""Raw ids -> dense model rows: admitted after `min_count` sightings, at most `max_rows` of them.

Bounded both ways, because the item stream is not: an id seen fewer than `min_count` times has
no row (it maps to 0, which the model treats as "not yet learned"), and once `max_rows` ids hold
rows, admitting another recycles the row of the least recently seen id. A recycled row is handed
out with its new id only; the caller resets its weights and optimiser state (`take_recycled`)
so nothing learned for the evicted id leaks into the new one. The mapping never holds two ids
for one row and never keeps an evicted id, so every published id map is one-to-one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class VocabularyLimits:
    min_count: int = 1
    """Sightings before an id gets a row (1: on first sight)."""
    max_rows: int = 1_000_000
    """Most ids holding a row; also the most not-yet-admitted ids whose sightings are counted."""

    def __post_init__(self) -> None:
        if self.min_count < 1 or self.max_rows < 1:
            raise ValueError("min_count and max_rows must be at least 1")


class IdVocabulary:
    """Row 0 is padding; rows are 1..n without gaps. Rows are never moved: a row is only ever
    reassigned by eviction, and then reported by `take_recycled`."""

    def __init__(
        self,
        mapping: Mapping[str, int] | None = None,
        limits: VocabularyLimits | None = None,
        sightings: Mapping[str, int] | None = None,
    ) -> None:
        self.limits = limits or VocabularyLimits()
        # Insertion order is recency order: the first id is the least recently seen.
        self._rows: OrderedDict[str, int] = OrderedDict(mapping or {})
        if sorted(self._rows.values()) != list(range(1, len(self._rows) + 1)):
            raise ValueError("vocabulary rows must be 1..n without gaps")
        self._ids = [""] * (len(self._rows) + 1)
        for raw, row in self._rows.items():
            self._ids[row] = raw
        self._sightings: OrderedDict[str, int] = OrderedDict(sightings or {})
        self._recycled: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, raw: str) -> bool:
        return raw in self._rows

    def get(self, raw: str) -> int:
        """Row of a known id, 0 for an unknown one (callers treat 0 as 'not yet learned')."""
        return self._rows.get(raw, 0)

    def admit(self, raw: str) -> int:
        """Records a sighting; the id's row, or 0 while it has fewer than `min_count`."""
        row = self._rows.get(raw)
        if row is not None:
            self._rows.move_to_end(raw)
            return row
        if not self._sighted_enough(raw):
            return 0
        if len(self._rows) < self.limits.max_rows:
            row = len(self._rows) + 1
            self._ids.append(raw)
        else:
            evicted, row = self._rows.popitem(last=False)
            self._recycled.setdefault(row, evicted)
            self._ids[row] = raw
        self._rows[raw] = row
        return row

    def _sighted_enough(self, raw: str) -> bool:
        if self.limits.min_count == 1:
            return True
        seen = self._sightings.pop(raw, 0) + 1
        if seen >= self.limits.min_count:
            return True
        self._sightings[raw] = seen  # re-inserted last: the most recently sighted
        if len(self._sightings) > self.limits.max_rows:
            self._sightings.popitem(last=False)
        return False

    def admit_all(self, raws: Iterable[str]) -> list[int]:
        return [self.admit(raw) for raw in raws]

    def take_recycled(self) -> dict[int, str]:
        """Rows reassigned since the last call -> the id evicted from each (the first one, if a
        row was recycled twice); the caller resets those rows before using them."""
        recycled, self._recycled = self._recycled, {}
        return recycled

    def id_of(self, row: int) -> str:
        return self._ids[row]

    def mapping(self) -> dict[str, int]:
        """id -> row, least recently seen first (what a checkpoint stores to keep the order)."""
        return dict(self._rows)

    def sightings(self) -> dict[str, int]:
        """Sightings of ids without a row yet, least recently sighted first."""
        return dict(self._sightings)

    def copy(self) -> IdVocabulary:
        twin = IdVocabulary(self._rows, self.limits, self._sightings)
        twin._recycled = dict(self._recycled)
        return twin
