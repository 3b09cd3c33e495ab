"""The one definition of a hit (schemas/hits.py)."""

import math

from schemas.events import EventType
from schemas.hits import Act, judge, ndcg, strict_hit

ITEMS = ["a", "b", "c", "d"]
T = 1_000.0


def act(item: str, at: float, kind: EventType = EventType.CLICK, request: str | None = None) -> Act:
    return Act(item, at, kind, request)


def test_the_strict_hit_is_the_next_act_on_a_top_k_item() -> None:
    assert strict_hit(ITEMS, "b", k=2)
    assert not strict_hit(ITEMS, "c", k=2)
    assert not strict_hit(ITEMS, None, k=2)


def test_ndcg_is_one_over_log2_of_the_rank_plus_one() -> None:
    assert ndcg(ITEMS, "a") == 1.0
    assert ndcg(ITEMS, "c") == 1 / math.log2(4)
    assert ndcg(ITEMS, "z") == 0.0 and ndcg(ITEMS, None) == 0.0
    assert ndcg([str(i) for i in range(20)], "10") == 0.0  # beyond rank 10


def test_only_choices_in_the_window_count_and_the_earliest_is_next() -> None:
    acts = [
        act("a", T + 50, EventType.VIEW),  # exposure, not a choice
        act("z", T - 1),  # before the answer
        act("c", T + 20),
        act("b", T + 10),  # the next act, though listed later
        act("a", T + 61),  # after the window
    ]
    out = judge(ITEMS, T, 60.0, acts, k=2)
    assert out.strict_hit and out.window_hit and out.clicked and not out.converted
    assert out.ndcg == 1 / math.log2(3)


def test_the_window_hit_counts_any_act_and_a_named_request_only_for_itself() -> None:
    later = [act("z", T + 1), act("d", T + 5, EventType.PURCHASE)]
    out = judge(ITEMS, T, 60.0, later, k=4, request_id="r1")
    assert not out.strict_hit and out.window_hit and out.converted and not out.clicked
    named = [act("a", T + 1, request="r2")]
    assert not judge(ITEMS, T, 60.0, named, k=4, request_id="r1").window_hit
    assert judge(ITEMS, T, 60.0, named, k=4, request_id="r2").window_hit
    assert judge(ITEMS, T, 60.0, named, k=4, request_id="r1").strict_hit  # still the next act
