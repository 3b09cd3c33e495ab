"""Item content aligns with the evaluation's item index; genre rows are unit vectors."""

from __future__ import annotations

import numpy as np
import pandas as pd

from models.item_content import ItemContent


def test_genre_rows_are_unit_multi_hot_in_item_index_order() -> None:
    items = pd.DataFrame({
        "item_id": ["b", "a", "zz"],
        "release_year": [1995.0, np.nan, 2001.0],
        "genres": [("Drama", "Comedy"), ("Drama",), ("Horror",)],
    })
    content = ItemContent.from_frame(items, ["a", "b", "c"])  # "c" has no metadata
    assert content.genre_names == ("Comedy", "Drama", "Horror")
    np.testing.assert_allclose(content.genres[1], [0.0, 1.0, 0.0])
    np.testing.assert_allclose(content.genres[2], [2 ** -0.5, 2 ** -0.5, 0.0], rtol=1e-6)
    assert not content.genres[0].any() and not content.genres[3].any()
    assert content.years[2] == 1995.0
    assert np.isnan(content.years[1]) and np.isnan(content.years[3])
