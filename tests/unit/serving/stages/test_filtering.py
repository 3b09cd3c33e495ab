from collections.abc import Sequence

from schemas.recommendations import RecommendationRequest
from serving.batch import Draft, excluded_items
from serving.experiment import Experiment
from serving.rules import BusinessRules
from serving.stages.filtering import Check
from tests.unit.serving.fakes import context


def _check(
    rules: BusinessRules | None = None,
    seen: Sequence[str] = (),
    unavailable: frozenset[str] = frozenset(),
    **fields: object,
) -> Check:
    rules = rules or BusinessRules()
    asked = RecommendationRequest.model_validate(
        {"request_id": "r", "user_id": "u", "sent_at": 1.7e9, **fields}
    )
    user = context("u", seen)
    excluded = excluded_items(asked, user, unavailable, rules)
    return Check.of(Draft(asked, user, excluded, Experiment().arms[0], (None, False)), rules)


CANDIDATES = [("a", 5.0), ("b", 4.0), ("c", 3.0), ("d", 2.0), ("e", 1.0)]
CATEGORIES = {"a": "shoes", "b": "hats", "c": "shoes", "d": "bags"}


def test_request_exclusions_unavailable_and_seen_items_are_removed() -> None:
    allowed = _check(exclude_items=["a"], seen=["b"], unavailable=frozenset({"c"}))
    assert [i for i, _ in allowed.apply(CANDIDATES, CATEGORIES)] == ["d", "e"]


def test_seen_items_stay_when_the_request_allows_them() -> None:
    allowed = _check(filters={"exclude_seen": False}, seen=["a", "b"])
    assert [i for i, _ in allowed.apply(CANDIDATES, CATEGORIES)] == ["a", "b", "c", "d", "e"]


def test_include_categories_keeps_only_those_and_drops_items_of_unknown_category() -> None:
    allowed = _check(filters={"include_categories": ["shoes", "bags"]})
    assert [i for i, _ in allowed.apply(CANDIDATES, CATEGORIES)] == ["a", "c", "d"]


def test_excluded_and_banned_categories_are_removed() -> None:
    rules = BusinessRules(banned_categories=["bags"], banned_items=["e"])
    allowed = _check(filters={"exclude_categories": ["hats"]}, rules=rules)
    assert [i for i, _ in allowed.apply(CANDIDATES, CATEGORIES)] == ["a", "c"]


def test_duplicates_keep_their_first_and_best_occurrence() -> None:
    allowed = _check()
    kept = allowed.apply([("a", 5.0), ("b", 4.0), ("a", 1.0)], {})
    assert kept == [("a", 5.0), ("b", 4.0)]
