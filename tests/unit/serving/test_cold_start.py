"""Places for new items at the end of a model answer."""

from __future__ import annotations

from serving.cold_start import with_new_items

ANSWER = [("a", 5.0), ("b", 4.0), ("c", 3.0), ("d", 2.0)]


def test_new_items_take_the_last_places_of_the_top_k_scored_in_between() -> None:
    placed = with_new_items(ANSWER, ["x", "y"], k=3)
    assert [i for i, _ in placed] == ["a", "x", "y", "b", "c", "d"]
    scores = [s for _, s in placed]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)


def test_a_short_answer_gets_its_new_items_after_it() -> None:
    placed = with_new_items(ANSWER[:1], ["x"], k=5)
    assert [i for i, _ in placed] == ["a", "x"] and placed[1][1] < 5.0


def test_a_new_item_already_below_the_top_k_moves_up_once() -> None:
    placed = with_new_items([*ANSWER, ("x", 1.0)], ["x"], k=2)
    assert [i for i, _ in placed] == ["a", "x", "b", "c", "d"]


def test_without_new_items_the_answer_is_unchanged() -> None:
    assert with_new_items(ANSWER, [], k=3) == ANSWER
