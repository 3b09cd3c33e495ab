"""bench live's figures: each arm's answers judged by the one definition of a hit against what
the users then published, ratios between arms over users, and the live/offline gap."""

from __future__ import annotations

import math

from bench.live.answers import (
    arm_figures,
    arm_ratios,
    arm_ratios_cuped,
    judge_all,
    user_covariates,
)
from bench.live.gap import gap
from bench.live.run import Options, settings
from deploy.demo.traffic import Published, Served


def _served(request: str, at: float, user: str, arm: str, items: tuple[str, ...],
            next_item: str) -> Served:
    return Served(request, at, user, arm, "model", items, next_item)


def test_strict_window_and_ndcg_follow_what_the_user_did_within_the_window() -> None:
    served = [_served("r1", 10.0, "u", "model", ("a", "b", "c"), "b")]
    published = [
        Published("u", "b", 10.5, "r1"),   # the next act: at rank 2
        Published("u", "c", 12.0, None),   # later, inside the 4 s window: a window hit too
        Published("u", "a", 20.0, None),   # outside the window
        Published("v", "a", 10.2, None),   # another user
    ]
    [judged] = judge_all(served, published, window_s=4.0)
    assert judged.strict and judged.window
    assert math.isclose(judged.ndcg, 1.0 / math.log2(3))


def test_an_act_naming_another_answer_is_no_window_hit_of_this_one() -> None:
    served = [_served("r1", 10.0, "u", "model", ("a",), "x")]
    published = [Published("u", "x", 10.5, None), Published("u", "a", 11.0, "r2")]
    [judged] = judge_all(served, published, window_s=4.0)
    assert not judged.strict and not judged.window and judged.ndcg == 0.0


def _arm_answers(arm: str, users: int, hit_every: int, first_user: int) -> list[Served]:
    out = []
    for u in range(first_user, first_user + users):
        for n in range(4):
            out.append(_served(f"{arm}{u}-{n}", float(n * 10), f"u{u}", arm, ("a",),
                               "a" if n % hit_every == 0 else "z"))
    return out


def test_ratios_compare_arms_on_their_own_users_with_an_interval() -> None:
    served = _arm_answers("model", 30, 2, 0) + _arm_answers("popularity", 30, 4, 100)
    published = [Published(s.user_id, s.next_item, s.sent_at + 0.5, None) for s in served]
    judged = judge_all(served, published, window_s=4.0)
    figures = arm_figures(judged, seed=0)
    assert figures["model"]["hit@10"] == 0.5 and figures["popularity"]["hit@10"] == 0.25
    assert figures["model"]["users"] == 30 and figures["model"]["answers"] == 120
    ratios = arm_ratios(judged, seed=0)
    assert set(ratios) == {"model_vs_popularity"}
    # Every user of an arm has the same rate: the interval is the ratio itself.
    assert ratios["model_vs_popularity"] == {"ratio": 2.0, "ci95": [2.0, 2.0]}


def test_the_gap_compares_served_and_offline_hits_on_the_same_requests() -> None:
    served = [_served(f"r{n}", float(n * 10), "u", "frozen", ("a", "b"), "a") for n in range(4)]
    published = [Published("u", "a", n * 10 + 0.5, None) for n in range(4)]
    judged = judge_all(served, published, window_s=4.0)
    offline = [("a", "b"), ("b", "a"), ("c", "d"), ("c", "d")]
    figures = gap(list(zip(judged, offline, strict=True)), published, window_s=4.0)
    assert figures["served_hit@10"] == 1.0 and figures["offline_hit@10"] == 0.5
    assert figures["gap"] == -1.0  # served hits twice as often as offline
    assert figures["same_list"] == 0.25 and figures["same_top10_set"] == 0.5


def test_covariates_are_what_was_known_before_assignment() -> None:
    published = [Published("u", "a", 1.0, None), Published("u", "b", 2.0, None),
                 Published("v", "a", 1.5, None)]
    covariates = user_covariates(["u", "u", "u", "w"], published)
    assert covariates["u"] == (2.0, 2 * math.log(4), 0.0)
    assert covariates["v"] == (1.0, 0.0, 1.0)  # no pre-training event
    assert "w" not in covariates  # not replayed


def test_cuped_ratios_stand_beside_the_plain_ones_for_the_same_arms() -> None:
    served = _arm_answers("model", 30, 2, 0) + _arm_answers("popularity", 30, 4, 100)
    published = [Published(s.user_id, s.next_item, s.sent_at + 0.5, None) for s in served]
    judged = judge_all(served, published, window_s=4.0)
    cuped = arm_ratios_cuped(judged, user_covariates([], published), seed=0)
    assert set(cuped) == set(arm_ratios(judged, seed=0))
    # Every user alike: nothing to adjust, the same ratio.
    assert cuped["model_vs_popularity"]["ratio"] == 2.0


def test_by_default_the_whole_second_half_is_replayed_user_paced() -> None:
    demo = settings(Options())
    assert demo.live_events is None  # every event of the second half
    assert demo.user_gap_s is not None and demo.experiment and demo.drift_after_s is None
    assert demo.request_lead_s == Options().request_lead_s
