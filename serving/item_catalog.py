"""The item metadata of `catalog.items`, held in memory by each scorer: the content features,
and cold start for the items a model version does not know yet.

The topic is compacted, one record per item, and small next to the events, so every scorer reads
it whole at start and then follows it (a global table, like Kafka Streams' GlobalKTable): a
request's content features are an in-memory gather, never a store round trip. Genre rows are
kept unit-length and their columns in sorted genre order, as
models.item_content.ItemContent.from_records lays them out, so a vector served from here equals
the one the offline path computes from the same metadata.

A version knows the items it was trained on; items that reached the catalog since (or that it
never saw an event of) cannot be retrieved by it. :meth:`ItemCatalog.new_items` offers, for a
user, the ones whose genres best match the user's recent items, among the newest
:data:`NEW_ITEMS_CONSIDERED` a version does not know.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from models.item_content import FloatArray, ItemContent, unit_genre_rows
from models.point_in_time import PROFILE_ITEMS
from schemas.catalog import CatalogItem

NEW_ITEMS_CONSIDERED = 1_000
"""Newest catalog items unknown to a version that a request looks at (bounds its cost)."""

_VERSIONS_KEPT = 4
"""Versions whose unknown items are tracked (serving, canary, and the ones before them)."""


@dataclass
class _Unknown:
    """The catalog rows a version does not know, newest last, tracked as the catalog grows."""

    known: Mapping[str, int]
    scanned: int = 0
    rows: list[int] = field(default_factory=list)


class ItemCatalog:
    """Item id -> unit genre row and release year; safe to read while another thread applies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._row: dict[str, int] = {}
        self._ids: list[str] = [""]
        """Row -> item id (row 0: no item)."""
        self._unknown: dict[int, _Unknown] = {}
        self._names: tuple[str, ...] = ()
        # Row 0 is what an item without a record gets: no genres, unknown year.
        self._genres: FloatArray = np.zeros((1, 1), dtype=np.float32)
        self._years: FloatArray = np.full(1, np.nan, dtype=np.float32)

    def __len__(self) -> int:
        return len(self._row)

    def apply(self, items: Iterable[CatalogItem]) -> None:
        """Each item's newest metadata replaces what was known of it (in the order given)."""
        latest = {item.item_id: item for item in items}
        if not latest:
            return
        with self._lock:
            self._widen({g for item in latest.values() for g in item.genres})
            self._grow(sum(1 for i in latest if i not in self._row))
            column = {name: j for j, name in enumerate(self._names)}
            multi_hot = np.zeros((len(latest), self._genres.shape[1]), dtype=np.float32)
            rows = np.empty(len(latest), dtype=np.int64)
            for n, item in enumerate(latest.values()):
                rows[n] = self._row.setdefault(item.item_id, len(self._row) + 1)
                if rows[n] == len(self._ids):
                    self._ids.append(item.item_id)
                multi_hot[n, [column[g] for g in item.genres]] = 1.0
                self._years[rows[n]] = np.nan if item.release_year is None else item.release_year
            self._genres[rows] = unit_genre_rows(multi_hot)

    def content(self, item_ids: Sequence[str]) -> ItemContent:
        """The content of ``item_ids`` (index i + 1 is ``item_ids[i]``; 0 is padding)."""
        with self._lock:
            rows = np.array([0, *(self._row.get(i, 0) for i in item_ids)], dtype=np.int64)
            return ItemContent(self._genres[rows], self._years[rows], self._names)

    def new_items(
        self,
        known: Mapping[str, int],
        history: Sequence[str],
        n: int,
        allowed: Callable[[str], bool],
    ) -> list[str]:
        """Up to `n` allowed items that `known` (a version's item index) lacks, best genre match
        with the newest :data:`PROFILE_ITEMS` of `history` (item ids, oldest first) first, the
        newest record first among equals; only items sharing a genre with them."""
        if n <= 0:
            return []
        with self._lock:
            rows = np.array(self._unknown_rows(known), dtype=np.int64)
            recent = [self._row.get(i, 0) for i in history[-PROFILE_ITEMS:]]
            profile = self._genres[recent].sum(axis=0)
            if not len(rows) or not profile.any():
                return []
            match = self._genres[rows] @ profile
            ids = self._ids
            # Equal matches (the same genres): the newest record first.
            best = np.lexsort((-rows, -match))
            ranked = [ids[rows[j]] for j in best if match[j] > 0]
        return [item for item in ranked if allowed(item)][:n]

    def track(self, known: Mapping[str, int]) -> None:
        """Finds the items `known` lacks now: a version's first answers then scan only the
        items published after it loaded."""
        with self._lock:
            self._unknown_rows(known)

    def _unknown_rows(self, known: Mapping[str, int]) -> list[int]:
        """The newest rows `known` lacks, brought up to date with the rows added since."""
        unknown = self._unknown.get(id(known))
        if unknown is None or unknown.known is not known:
            unknown = self._unknown[id(known)] = _Unknown(known)
            while len(self._unknown) > _VERSIONS_KEPT:
                del self._unknown[next(iter(self._unknown))]
        rows = len(self._ids)
        if unknown.scanned < rows - 1:
            ids = self._ids
            unknown.rows.extend(
                r for r in range(unknown.scanned + 1, rows) if ids[r] not in known
            )
            unknown.rows = unknown.rows[-NEW_ITEMS_CONSIDERED:]
            unknown.scanned = rows - 1
        return unknown.rows

    def _widen(self, genres: set[str]) -> None:
        """Adds the genres not seen before, keeping the columns in sorted order."""
        if genres <= set(self._names):
            return
        names = tuple(sorted({*self._names, *genres}))
        widened = np.zeros((self._genres.shape[0], len(names)), dtype=np.float32)
        if self._names:
            at = {name: j for j, name in enumerate(names)}
            widened[:, [at[name] for name in self._names]] = self._genres
        self._genres, self._names = widened, names

    def _grow(self, new_items: int) -> None:
        """Room for `new_items` more rows (capacity doubles, so growing item by item is cheap)."""
        needed = len(self._row) + 1 + new_items
        if needed <= len(self._years):
            return
        capacity = max(needed, 2 * len(self._years))
        genres = np.zeros((capacity, self._genres.shape[1]), dtype=np.float32)
        genres[: len(self._genres)] = self._genres
        years = np.full(capacity, np.nan, dtype=np.float32)
        years[: len(self._years)] = self._years
        self._genres, self._years = genres, years
