"""What the catalog knows about each item, aligned with the evaluation's item index.

Genres become an L2-normalised multi-hot row per item (so the dot product of two rows is their
cosine) and the release year a float (NaN when unknown). Row 0 is padding, as in every item
table of :mod:`models.sequences`. A dataset without item metadata gets :meth:`ItemContent.empty`:
zero genre rows and unknown years, so content features are constant and carry no signal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class ItemContent:
    """``genres [n_items + 1, n_genres]`` (unit rows or zero) and ``years [n_items + 1]``."""

    genres: FloatArray
    years: FloatArray
    genre_names: tuple[str, ...]

    @classmethod
    def empty(cls, n_items: int) -> ItemContent:
        return cls(
            genres=np.zeros((n_items + 1, 1), dtype=np.float32),
            years=np.full(n_items + 1, np.nan, dtype=np.float32),
            genre_names=(),
        )

    @classmethod
    def from_frame(cls, items: pd.DataFrame, item_ids: Sequence[str]) -> ItemContent:
        """Content of ``item_ids`` (index i + 1 is ``item_ids[i]``) from a frame with columns
        ``item_id``, ``release_year`` and ``genres`` (tuples); items it lacks stay unknown."""
        return cls.from_records(
            item_ids,
            zip(items["item_id"].astype(str), items["release_year"], items["genres"],
                strict=True),
        )

    @classmethod
    def from_records(
        cls, item_ids: Sequence[str], records: Iterable[tuple[str, float | None, Sequence[str]]]
    ) -> ItemContent:
        """Content of ``item_ids`` (index i + 1 is ``item_ids[i]``) from (item id, release year
        or None, genres) records; items without one stay unknown. The genre columns are the
        records' genres in sorted order."""
        known = list(records)
        names = tuple(sorted({g for _, _, item_genres in known for g in item_genres}))
        column = {name: j for j, name in enumerate(names)}
        row_of = {item: i + 1 for i, item in enumerate(item_ids)}
        genres = np.zeros((len(item_ids) + 1, max(1, len(names))), dtype=np.float32)
        years = np.full(len(item_ids) + 1, np.nan, dtype=np.float32)
        for item, year, item_genres in known:
            row = row_of.get(item)
            if row is None:
                continue
            years[row] = np.nan if year is None else year
            for genre in item_genres:
                genres[row, column[genre]] = 1.0
        return cls(genres=unit_genre_rows(genres), years=years, genre_names=names)


def unit_genre_rows(multi_hot: FloatArray) -> FloatArray:
    """Multi-hot genre rows scaled to unit L2 norm (rows without a genre stay zero)."""
    norms = np.linalg.norm(multi_hot, axis=1, keepdims=True)
    unit: FloatArray = np.divide(multi_hot, norms, out=np.zeros_like(multi_hot), where=norms > 0)
    return unit
