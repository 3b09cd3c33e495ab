"""The scorer's in-memory item catalog describes items exactly as the offline content does, and
finds the items a version does not know that match a user."""

from __future__ import annotations

import time

import numpy as np

from models.item_content import ItemContent
from schemas.catalog import CatalogItem
from serving.item_catalog import NEW_ITEMS_CONSIDERED, ItemCatalog


def _item(item_id: str, genres: list[str], year: int | None = None) -> CatalogItem:
    return CatalogItem(item_id=item_id, genres=genres, release_year=year, updated_at=time.time())


def _records(items: list[CatalogItem]) -> list[tuple[str, float | None, list[str]]]:
    return [(i.item_id, i.release_year, i.genres) for i in items]


def _content(catalog: ItemCatalog, asked: list[str]) -> ItemContent:
    """The catalog's content of `asked`, as seen by a version that knows exactly them."""
    known = {item: n + 1 for n, item in enumerate(asked)}
    return catalog.content(known, np.arange(1, len(asked) + 1))


def _assert_same(got: ItemContent, expected: ItemContent) -> None:
    assert got.genre_names == expected.genre_names
    np.testing.assert_array_equal(got.genres, expected.genres)
    np.testing.assert_array_equal(got.years, expected.years)


def test_content_equals_the_offline_content_of_the_same_metadata() -> None:
    items = [_item("a", ["Drama", "Action"], 1995), _item("b", ["Comedy"]),
             _item("c", [], 1970), _item("d", ["Action", "Comedy", "Western"], 2001)]
    catalog = ItemCatalog()
    catalog.apply(items)
    asked = ["d", "unknown", "a", "c", "b"]
    _assert_same(_content(catalog, asked), ItemContent.from_records(asked, _records(items)))


def test_genres_arriving_later_keep_the_columns_sorted_and_rows_intact() -> None:
    first = [_item(f"i{n}", ["M"], 1990 + n) for n in range(5)]
    later = [_item("x", ["A", "Z"]), _item("y", ["M", "B"])]
    catalog = ItemCatalog()
    catalog.apply(first)
    catalog.apply(later)  # two new columns, one before and one after "M"; more rows than room
    asked = ["x", "i0", "y", "i4"]
    _assert_same(_content(catalog, asked), ItemContent.from_records(asked, _records(first + later)))


def test_an_items_newest_record_replaces_what_was_known() -> None:
    catalog = ItemCatalog()
    catalog.apply([_item("a", ["Drama"], 1995), _item("b", ["Comedy"], 1980)])
    catalog.apply([_item("a", ["Horror"]), _item("a", ["Comedy"], 2000)])
    content = _content(catalog, ["a", "b"])
    np.testing.assert_array_equal(content.genres[1], content.genres[2])
    assert content.years.tolist()[1:] == [2000.0, 1980.0]
    assert len(catalog) == 2


def test_items_without_a_record_have_no_genres_and_no_year() -> None:
    catalog = ItemCatalog()
    content = _content(catalog, ["a", "b"])
    assert content.genres.shape[0] == 3 and not content.genres.any()
    assert np.isnan(content.years).all()


def test_new_items_are_those_the_version_lacks_best_genre_match_first() -> None:
    catalog = ItemCatalog()
    catalog.apply([_item("k1", ["Drama"]), _item("k2", ["Drama", "Crime"]),
                   _item("n-comedy", ["Comedy"]), _item("n-drama", ["Drama"]),
                   _item("n-crime", ["Crime", "Drama", "Western"]), _item("n-none", [])])
    known = {"k1": 1, "k2": 2}
    found = catalog.new_items(known, ["k1", "k2"], 5)
    # The profile leans Drama, then Crime: "n-drama" matches best, then "n-crime"; "n-comedy"
    # and "n-none" share no genre with it and get no place.
    assert found == ["n-drama", "n-crime"]
    assert catalog.new_items(known, ["k1", "k2"], 1) == [found[0]]
    assert catalog.new_items(known, ["unknown-item"], 5) == []


def test_items_published_after_a_version_loaded_become_its_new_items() -> None:
    catalog = ItemCatalog()
    catalog.apply([_item("k1", ["Drama"])])
    known = {"k1": 1}
    catalog.track(known)
    assert catalog.new_items(known, ["k1"], 3) == []
    catalog.apply([_item("later", ["Drama"]), _item("k1", ["Drama", "Crime"])])
    assert catalog.new_items(known, ["k1"], 3) == ["later"]
    # The version's own item sees its newest metadata.
    assert catalog.content(known, np.array([1])).genre_names == ("Crime", "Drama")
    assert (catalog.content(known, np.array([1])).genres[1] > 0).sum() == 2
    # Another version that knows it has none.
    assert catalog.new_items({"k1": 1, "later": 2}, ["k1"], 3) == []


def test_only_the_newest_unknown_items_are_considered() -> None:
    catalog = ItemCatalog()
    catalog.apply([_item(f"n{n}", ["Drama"]) for n in range(NEW_ITEMS_CONSIDERED + 5)])
    catalog.apply([_item("k", ["Drama"])])
    found = catalog.new_items({"k": 1}, ["k"], NEW_ITEMS_CONSIDERED + 5)
    assert len(found) == NEW_ITEMS_CONSIDERED
    assert "n0" not in found and f"n{NEW_ITEMS_CONSIDERED + 4}" in found


def test_among_equal_matches_the_newest_record_comes_first() -> None:
    catalog = ItemCatalog()
    catalog.apply([_item("k", ["Drama"])])
    catalog.apply([_item(f"n{n}", ["Drama"]) for n in range(4)])
    assert catalog.new_items({"k": 1}, ["k"], 2) == ["n3", "n2"]


def test_a_deleted_item_has_no_content_and_is_no_new_item_until_a_new_record() -> None:
    catalog = ItemCatalog()
    catalog.apply([_item("k1", ["Drama"], 1990), _item("n1", ["Drama"], 2001),
                   _item("n2", ["Drama"])])
    known = {"k1": 1}
    catalog.delete("n1")
    catalog.delete("never-published")
    assert len(catalog) == 2
    assert catalog.new_items(known, ["k1"], 5) == ["n2"]
    deleted = _content(catalog, ["n1"])
    assert not deleted.genres.any() and np.isnan(deleted.years).all()
    catalog.apply([_item("n1", ["Drama"], 2001)])
    assert len(catalog) == 3
    assert sorted(catalog.new_items(known, ["k1"], 5)) == ["n1", "n2"]
    assert _content(catalog, ["n1"]).years.tolist()[1:] == [2001.0]
