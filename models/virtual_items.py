"""Non-item pages as virtual items: page views become tokens of the item sequence.

A session holds more than item views (a category page, a search, the cart); as tokens in the
sequence they tell the encoder what the user was looking for. They are inputs only: the rows
after the catalog in the item table (``SessionTransformerConfig.virtual_items``), never a
training target and never scored.

MovieLens-100K records ratings only, no pages. What stands in for them is a genre page: after an
item whose first genre differs from the genre page last inserted for the user, a view of that
genre's page at the same time. It is derived from the items alone, so it adds no information the
item table could not learn, only a shared token per genre; the gain real pages bring (intent the
items do not show) cannot be measured on this data, and the extra tokens take places in the
``max_len`` window from real items.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from models.item_content import ItemContent
from models.sequences import Queries, UserSequences

IntArray = npt.NDArray[np.int64]


class GenrePages:
    """Inserts genre-page tokens ``n_items + 1 + genre`` into index-encoded sequences."""

    def __init__(self, content: ItemContent, n_items: int) -> None:
        self.n_items = n_items
        has_genre = content.genres.any(axis=1)
        first = content.genres.argmax(axis=1)
        self.page_of = np.where(has_genre, first, -1).astype(np.int64)
        self.pages = int(content.genres.shape[1]) if has_genre.any() else 0

    def insert(self, items: IntArray, times: IntArray) -> tuple[IntArray, IntArray]:
        out_items: list[int] = []
        out_times: list[int] = []
        current = -1
        for item, t in zip(items.tolist(), times.tolist(), strict=True):
            out_items.append(item)
            out_times.append(t)
            page = int(self.page_of[item]) if item <= self.n_items else -1
            if page >= 0 and page != current:
                out_items.append(self.n_items + 1 + page)
                out_times.append(t)
                current = page
        return np.asarray(out_items, dtype=np.int64), np.asarray(out_times, dtype=np.int64)

    def sequences(self, train: UserSequences) -> UserSequences:
        pairs = [self.insert(s, t) for s, t in zip(train.items, train.times, strict=True)]
        return UserSequences([p[0] for p in pairs], [p[1] for p in pairs],
                             train.n_items + self.pages)

    def queries(self, queries: Queries) -> Queries:
        pairs = [self.insert(h, t) for h, t in
                 zip(queries.histories, queries.history_times, strict=True)]
        return Queries([p[0] for p in pairs], [p[1] for p in pairs], queries.query_times,
                       queries.targets)
