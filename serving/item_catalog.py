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

A tombstone (the item id as key, no value) deletes an item's record: the catalog then knows
nothing of it, as if it had never had one. Whether an item may be recommended at all is the
serving configuration's `unavailable` set, not the catalog's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from models.item_content import FloatArray, ItemContent, unit_genre_rows
from models.point_in_time import PROFILE_ITEMS
from schemas.catalog import CatalogItem
from serving.model_bundle import IntArray

NEW_ITEMS_CONSIDERED = 1_000
"""Newest catalog items unknown to a version that a request looks at (bounds its cost)."""

_VERSIONS_KEPT = 4
"""Versions whose items are mapped to the catalog (serving, canary, and the ones before)."""


@dataclass
class _Version:
    """What the catalog holds of one version's items, kept up to date as the catalog grows: the
    catalog row of each of its item indices (0: no record), and the rows it does not know,
    newest last."""

    known: Mapping[str, int]
    rows: IntArray
    scanned: int = 0
    unknown: list[int] = field(default_factory=list)


class ItemCatalog:
    """Item id -> unit genre row and release year; safe to read while another thread applies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._row: dict[str, int] = {}
        self._ids: list[str] = [""]
        """Row -> item id (row 0: no item)."""
        self._deleted: set[str] = set()
        """Items whose record a tombstone deleted: their rows stay, holding no content."""
        self._versions: dict[int, _Version] = {}
        self._names: tuple[str, ...] = ()
        # Row 0 is what an item without a record gets: no genres, unknown year.
        self._genres: FloatArray = np.zeros((1, 1), dtype=np.float32)
        self._years: FloatArray = np.full(1, np.nan, dtype=np.float32)

    def __len__(self) -> int:
        return len(self._row) - len(self._deleted)

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
            self._deleted -= latest.keys()

    def delete(self, item_id: str) -> None:
        """Forgets an item's metadata (its record's tombstone): its content becomes that of an
        item without a record, and it shares no genre, so it is never offered as a new item.
        Its row stays (the versions' mappings point at rows), empty until a new record."""
        with self._lock:
            row = self._row.get(item_id)
            if row is None:
                return
            self._genres[row] = 0.0
            self._years[row] = np.nan
            self._deleted.add(item_id)

    def content(self, known: Mapping[str, int], indices: IntArray) -> ItemContent:
        """The content of a version's items: `known` is its item index, and row j + 1 of the
        answer describes its item `indices[j]` (row 0 is padding)."""
        with self._lock:
            rows = np.concatenate([[0], self._version(known).rows[indices]])
            return ItemContent(self._genres[rows], self._years[rows], self._names)

    def new_items(self, known: Mapping[str, int], history: Sequence[str], n: int) -> list[str]:
        """Up to `n` items that `known` (a version's item index) lacks, best genre match with
        the newest :data:`PROFILE_ITEMS` of `history` (item ids, oldest first) first, the newest
        record first among equals; only items sharing a genre with them."""
        if n <= 0:
            return []
        with self._lock:
            rows = np.array(self._version(known).unknown, dtype=np.int64)
            recent = [self._row.get(i, 0) for i in history[-PROFILE_ITEMS:]]
            profile = self._genres[recent].sum(axis=0)
            if not len(rows) or not profile.any():
                return []
            match = self._genres[rows] @ profile
            ids = self._ids
            # Equal matches (the same genres): the newest record first.
            best = np.lexsort((-rows, -match))[:n]
            return [ids[rows[j]] for j in best if match[j] > 0]

    def track(self, known: Mapping[str, int]) -> None:
        """Maps a version's items to the catalog now (a scan of the catalog), so that its
        requests only look at the records added since."""
        with self._lock:
            self._version(known)

    def _version(self, known: Mapping[str, int]) -> _Version:
        version = self._versions.get(id(known))
        if version is None or version.known is not known:
            size = max(known.values(), default=0) + 1
            version = self._versions[id(known)] = _Version(known, np.zeros(size, np.int64))
            while len(self._versions) > _VERSIONS_KEPT:
                del self._versions[next(iter(self._versions))]
        if version.scanned < len(self._ids) - 1:
            ids = self._ids
            for row in range(version.scanned + 1, len(ids)):
                index = known.get(ids[row])
                if index is None:
                    version.unknown.append(row)
                else:
                    version.rows[index] = row
            version.unknown = version.unknown[-NEW_ITEMS_CONSIDERED:]
            version.scanned = len(ids) - 1
        return version

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
