from serving.rules import BusinessRules
from serving.stages.ordering import Ranked, apply_rules, backfill, boosted, with_new_items

CATEGORIES = {"a": "x", "b": "x", "c": "x", "d": "y", "e": "z"}
RANKED = [Ranked("a", 0.9), Ranked("b", 0.8), Ranked("c", 0.7), Ranked("d", 0.6), Ranked("e", 0.5)]


def ids(ranked: list[Ranked]) -> list[str]:
    return [r.item_id for r in ranked]


def test_without_rules_the_ranker_order_is_kept_and_cut_at_k() -> None:
    assert ids(apply_rules(RANKED, BusinessRules(), CATEGORIES, k=3)) == ["a", "b", "c"]


def test_campaign_boost_moves_an_item_up() -> None:
    rules = BusinessRules(item_boosts={"e": 2.0})
    assert ids(apply_rules(RANKED, rules, CATEGORIES, k=3)) == ["e", "a", "b"]


def test_category_boost_applies_to_every_item_of_the_category() -> None:
    rules = BusinessRules(category_boosts={"y": 1.6})
    assert ids(apply_rules(RANKED, rules, CATEGORIES, k=2)) == ["d", "a"]


def test_a_boost_above_one_promotes_negative_scores_too() -> None:
    assert boosted(-1.0, 2.0) > -1.0
    assert boosted(1.0, 2.0) > 1.0


def test_diversity_caps_items_per_category_and_backfills_when_nothing_else_is_left() -> None:
    rules = BusinessRules(max_per_category=1)
    assert ids(apply_rules(RANKED, rules, CATEGORIES, k=5)) == ["a", "d", "e", "b", "c"]


def test_pinned_item_takes_its_position_even_from_outside_the_candidates() -> None:
    rules = BusinessRules(pinned={"p": 0, "e": 1})
    result = apply_rules(RANKED, rules, CATEGORIES, k=4)
    assert ids(result) == ["p", "e", "a", "b"]
    assert result[0].score >= result[2].score


def test_pins_are_applied_only_for_the_items_the_caller_allows() -> None:
    rules = BusinessRules(pinned={"p": 0})
    assert ids(apply_rules(RANKED, rules, CATEGORIES, k=2, pinned={})) == ["a", "b"]


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


def test_a_short_answer_is_topped_up_below_its_last_score() -> None:
    topped = backfill(ANSWER[:2], [("p", 90.0), ("q", 80.0)])
    assert topped == [("a", 5.0), ("b", 4.0), ("p", 3.0), ("q", 2.0)]
