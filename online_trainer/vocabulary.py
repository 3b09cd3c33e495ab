"""Raw ids -> dense model rows, admitted on first sight, never colliding, never reused."""

from __future__ import annotations

from collections.abc import Iterable


class IdVocabulary:
    """Row 0 is padding; the n-th distinct id gets row n. The mapping only grows, so a row
    index stays valid across every published version of the same lineage."""

    def __init__(self, mapping: dict[str, int] | None = None) -> None:
        self._rows: dict[str, int] = dict(mapping or {})
        if sorted(self._rows.values()) != list(range(1, len(self._rows) + 1)):
            raise ValueError("vocabulary rows must be 1..n without gaps")
        self._ids = ["", *sorted(self._rows, key=self._rows.__getitem__)]

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, raw: str) -> bool:
        return raw in self._rows

    def get(self, raw: str) -> int:
        """Row of a known id, 0 for an unknown one (callers treat 0 as 'not yet learned')."""
        return self._rows.get(raw, 0)

    def admit(self, raw: str) -> int:
        row = self._rows.get(raw)
        if row is None:
            row = len(self._rows) + 1
            self._rows[raw] = row
            self._ids.append(raw)
        return row

    def admit_all(self, raws: Iterable[str]) -> list[int]:
        return [self.admit(raw) for raw in raws]

    def id_of(self, row: int) -> str:
        return self._ids[row]

    def mapping(self) -> dict[str, int]:
        return dict(self._rows)
