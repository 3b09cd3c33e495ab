"""A run's experiment arms: strict hits per arm with intervals over users, per phase and over
time, and the arms the scorer is configured with."""

from __future__ import annotations

import json

import pytest

from deploy.demo.arms import (
    ARMS,
    arm_figures,
    arm_series,
    arms_by_phase,
    experiment_arms,
    recent_rates,
)
from deploy.demo.traffic import Served
from serving.settings import ServeSettings


def _served(at: float, user: str, arm: str, hit: bool) -> Served:
    return Served(f"{user}-{at}", at, user, arm, "model", ("a", "b"), "a" if hit else "z")


def _answers() -> list[Served]:
    out = []
    for u in range(40):
        # model users hit every other answer, popularity users one in four
        arm, every = ("model", 2) if u % 2 else ("popularity", 4)
        out += [_served(float(n), f"u{u}", arm, n % every == 0) for n in range(8)]
    return out


def test_each_arm_counts_its_answers_and_strict_hits_with_an_interval_over_users() -> None:
    figures = arm_figures(_answers())
    assert figures["model"]["answers"] == 160 and figures["model"]["users"] == 20
    assert figures["model"]["hit_rate"] == 0.5 and figures["popularity"]["hit_rate"] == 0.25
    # Every user of an arm has the same rate: resampling users cannot move it.
    assert figures["model"]["ci95"] == [0.5, 0.5]
    mixed = arm_figures([_served(0.0, "a", "ranker", True), _served(1.0, "b", "ranker", False)])
    assert mixed["ranker"]["ci95"] == [0.0, 1.0]


def test_the_live_rates_count_only_requests_sent_since_the_cut() -> None:
    served = [_served(1.0, "u1", "model", True), _served(5.0, "u1", "model", False),
              _served(6.0, "u2", "popularity", True), _served(2.0, "u3", "ranker", True)]
    assert recent_rates(served, 5.0) == {"model": (0.0, 1), "popularity": (1.0, 1)}
    assert recent_rates(served, 10.0) == {}


def test_a_hit_is_the_next_item_within_the_top_ten_only() -> None:
    items = tuple(f"i{n}" for n in range(12))
    tenth = Served("r", 0.0, "u", "model", "model", items, "i9")
    eleventh = Served("r", 0.0, "u", "model", "model", items, "i10")
    assert arm_figures([tenth])["model"]["hit_rate"] == 1.0
    assert arm_figures([eleventh])["model"]["hit_rate"] == 0.0


def test_phases_and_the_series_count_requests_by_when_they_left() -> None:
    answers = _answers()
    by_phase = arms_by_phase(answers, {"early": (0.0, 4.0), "late": (4.0, 8.0)})
    assert by_phase["early"]["model"]["answers"] == 80
    assert by_phase["early"]["popularity"]["hit_rate"] == 0.25
    series = arm_series(answers, origin=0.0, bin_s=4.0)
    assert series == [
        {"t": t, "model": 0.5, "model_ci95": [0.5, 0.5],
         "popularity": 0.25, "popularity_ci95": [0.25, 0.25]} for t in (0.0, 4.0)
    ]


def test_the_scorer_takes_the_arms_with_frozen_pinning_the_first_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STREAMREC_EXPERIMENT__NAME", "demo")
    monkeypatch.setenv("STREAMREC_EXPERIMENT__ARMS", json.dumps(experiment_arms("1.0")))
    experiment = ServeSettings().experiment
    assert tuple(a.name for a in experiment.arms) == ARMS
    assert experiment.pinned == frozenset({"1.0"})
    shares = [experiment.assign(f"{u}").name for u in range(4000)]
    assert all(abs(shares.count(a) / 4000 - 0.25) < 0.03 for a in ARMS)
