"""What the catalog knows about each item, aligned with the evaluation's item index.

Genres become an L2-normalised multi-hot row per item (so the dot product of two rows is their
cosine) and the release year a float (NaN when unknown). Row 0 is padding, as in every item
table of :mod:`models.sequences`. A dataset without item metadata gets :meth:`ItemContent.empty`:
zero genre rows and unknown years, so content features are constant and carry no signal.
"""

from __future__ import annotations

from collections.abc import Sequence
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
        names = tuple(sorted({g for genres in items["genres"] for g in genres}))
        column = {name: j for j, name in enumerate(names)}
        row_of = {item: i + 1 for i, item in enumerate(item_ids)}
        genres = np.zeros((len(item_ids) + 1, max(1, len(names))), dtype=np.float32)
        years = np.full(len(item_ids) + 1, np.nan, dtype=np.float32)
        for item, year, item_genres in zip(
            items["item_id"], items["release_year"], items["genres"], strict=True
        ):
            row = row_of.get(str(item))
            if row is None:
                continue
            years[row] = year
            for genre in item_genres:
                genres[row, column[genre]] = 1.0
        norms = np.linalg.norm(genres, axis=1, keepdims=True)
        genres = np.divide(genres, norms, out=np.zeros_like(genres), where=norms > 0)
        return cls(genres=genres, years=years, genre_names=names)
