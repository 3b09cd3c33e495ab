"""The offline replay's clock, feature-store view and hit accounting, and a short replay through
the real trainer and scorer code."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.live_offline.arms import (
    ARMS,
    EXPERIMENT,
    ReplayReader,
    ReplayScorer,
    experiment,
    replay_scorer,
)
from bench.live_offline.feature_view import FeatureView
from bench.live_offline.outcome import ArmRecord, summarise
from bench.live_offline.run import Options, run
from bench.live_offline.timeline import Clock, build, tied_items, window_items
from schemas.model_log import FALLBACK_VERSIONS
from serving.settings import ServeSettings
from serving.stages.ordering import Answer
from streams.features.definitions import SEQUENCE_LENGTH
from tests.unit.serving.fakes import context, make_bundle, request

BASE = 900_000_000


def _frame(rows: list[tuple[str, str, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"])


def _burst(n: int = 20) -> pd.DataFrame:
    """One user rating n items in one second, then another user."""
    rows = [("a", f"i{k}", BASE + 10) for k in range(n)] + [("b", "i0", BASE + 20)]
    return _frame(rows)


def test_a_request_sees_what_reached_the_store_by_its_slot_never_its_own_event() -> None:
    first = _frame([("a", "i0", BASE)])
    clock = Clock(rate=10.0, lead_s=0.5, pipeline_s=0.05)
    timeline = build(first, _burst(), clock)
    # 0.55 s from slot to store at 10 events/s: the 5 events before each are not visible yet.
    assert timeline.visible.tolist() == [max(0, i - 5) for i in range(len(timeline))]
    assert np.allclose(np.diff(timeline.slots), 0.1)


def test_at_dataset_time_events_of_the_same_second_are_not_visible_to_each_other() -> None:
    timeline = build(_frame([]), _burst(5), Clock(rate=None, lead_s=0.5, pipeline_s=0.05))
    assert timeline.visible.tolist() == [0, 0, 0, 0, 0, 5]


def test_a_user_paced_schedule_waits_for_the_users_previous_event() -> None:
    clock = Clock(rate=100.0, lead_s=0.05, pipeline_s=0.02, user_gap_s=0.1)
    timeline = build(_frame([]), _burst(4), clock)
    a = [i for i, u in enumerate(timeline.users) if u == "a"]
    assert np.all(np.diff(timeline.slots[a]) >= 0.15 - 1e-9)
    # Each of a's requests sees every event before it, a's own included.
    assert [int(timeline.visible[i]) for i in a[1:]] == a[1:]
    # The other user is not held back behind a's burst.
    assert timeline.users.index("b") < a[-1]


def test_the_window_holds_the_users_events_up_to_its_end_and_ties_the_same_second() -> None:
    frame = _frame([("a", "x", BASE), ("b", "y", BASE), ("a", "z", BASE + 1),
                    ("a", "w", BASE + 5)])
    timeline = build(_frame([]), frame, Clock(rate=1.0, lead_s=0.5, pipeline_s=0.0))
    windows = window_items(timeline, window_s=2.6)
    assert windows[0] == frozenset({"x", "z"})  # a's events at 0.5 and 2.5 s
    assert windows[1] == frozenset({"y"})
    tied = tied_items(timeline)
    assert tied[0] == frozenset({"x"}) and tied[2] == frozenset({"z"})


def test_the_store_keeps_the_newest_sequence_and_recent_popularity() -> None:
    view = FeatureView(popularity_bucket_s=60)
    for k in range(SEQUENCE_LENGTH + 5):
        view.apply("a", f"i{k}", BASE + k)
    context = view.context("a")
    assert len(context.user_events) == SEQUENCE_LENGTH
    assert context.user_events[-1].item_id == f"i{SEQUENCE_LENGTH + 4}"
    assert view.older_items("a", 3) == ["i2", "i3", "i4"]
    view = FeatureView(popularity_bucket_s=60)
    for item, t in (("old", 0), ("old", 1), ("old", 2), ("new", 61), ("new", 62)):
        view.apply("u", item, 60 * 1000 + t)
    # Newest bucket's count plus half of the previous one's.
    assert view.popular() == [("new", 2.0), ("old", 1.5)]


def test_states_are_kept_as_of_the_moment_they_were_taken() -> None:
    view = FeatureView(popularity_bucket_s=60)
    view.apply("u", "x", 100.0)
    states = view.item_states()
    view.apply("u", "x", 200.0)
    first, last, count = states(["x", "unknown"])
    assert first[0] == 100.0 and last[0] == 100.0 and count.tolist() == [1.0, 0.0]
    assert np.isnan(first[1])


def _replay_scorer() -> ReplayScorer:
    users = [f"u{n}" for n in range(60)]
    reader = ReplayReader(
        contexts={f"r-{u}-5": context(u, [f"i{n % 40 + 1}", f"i{n % 7 + 1}"])
                  for n, u in enumerate(users)},
        popular=[(f"i{n}", float(100 - n)) for n in range(1, 30)],
        states=lambda ids: (np.full(len(ids), np.nan), np.full(len(ids), np.nan),
                            np.zeros(len(ids))),
    )
    scorer = replay_scorer(reader, ServeSettings(), None, experiment(ARMS, "salt", "1.0"))
    scorer.route(make_bundle("1.3", seed=1), make_bundle("1.0", seed=0), None)
    return scorer


def test_users_are_assigned_by_the_scorers_experiment_and_answered_as_their_arm_alone() -> None:
    scorer = _replay_scorer()
    users = [f"u{n}" for n in range(60)]
    requests = [request(u) for u in users]
    assigned = scorer.answer(requests, 1e9)
    each: dict[str, list[Answer]] = {arm: scorer.answer(requests, 1e9, arm) for arm in ARMS}
    configured = experiment(ARMS, "salt", "1.0")
    assert {scorer.arm(u) for u in users} == set(ARMS)
    for n, (user, answer) in enumerate(zip(users, assigned, strict=True)):
        arm = scorer.arm(user)
        assert arm == configured.assign(user).name == answer.response.arm
        assert answer.response.experiment == EXPERIMENT
        alone = each[arm][n].response.items
        # Items and order exactly; scores to float tolerance (a batch of other users' queries
        # may round the same dot product differently).
        assert [i.item_id for i in answer.response.items] == [i.item_id for i in alone]
        assert [i.score for i in answer.response.items] == pytest.approx(
            [i.score for i in alone], rel=1e-5)
    assert all(a.response.arm == arm for arm, answers in each.items() for a in answers)
    assert all(a.response.model_version == "1.0" for a in each["frozen"])
    assert all(a.response.model_version == "1.3" for a in each["model"])
    assert all(a.response.strategy == "popularity" for a in each["popularity"])


def test_hits_count_the_next_item_its_rank_and_the_window() -> None:
    record = ArmRecord()
    record.add(["a", "b", "c"], "b", frozenset({"b"}), frozenset({"b"}), "model", 10)
    record.add(["a", "b", "c"], "z", frozenset({"z", "c"}), frozenset({"z"}), "popularity", 2)
    assert record.strict == [True, False]
    assert record.ndcg == [pytest.approx(1 / np.log2(3)), 0.0]
    assert record.window == [True, False]  # "c" is past k=2
    assert record.popular == [False, True]


def test_the_assigned_view_measures_each_arm_on_its_own_users_only() -> None:
    users = ["u1", "u1", "u2", "u2"]
    good, bad = ArmRecord(), ArmRecord()
    for hit in (True, True, False, False):
        good.add(["t"] if hit else ["x"], "t", frozenset(), frozenset(), "model", 10)
        bad.add(["x"], "t", frozenset(), frozenset(), "popularity", 10)
    assignment = {"u1": "model", "u2": "popularity"}
    out = summarise(users, {"model": good, "popularity": bad}, assignment, {}, seed=0)
    assert out["assigned"]["arms"]["model"]["answers"] == 2
    assert out["assigned"]["arms"]["model"]["hit@10"] == 1.0
    assert out["counterfactual"]["arms"]["model"]["hit@10"] == 0.5
    assert np.isnan(out["counterfactual"]["ratios"]["model_vs_popularity"]["ratio"])


def _cycles(tmp_path: Path) -> Path:
    """60 users walking a cycle of 60 items from different starts, one event every 30 s."""
    rng = np.random.default_rng(0)
    rows = []
    for u in range(60):
        start = int(rng.integers(0, 60))
        t0 = BASE + int(rng.integers(0, 20_000))
        rows += [(f"u{u}", f"i{(start + k) % 60}", t0 + 30 * k) for k in range(16)]
    path = tmp_path / "cycles.csv"
    _frame(rows).to_csv(path, index=False)
    return path


_TINY = {"model.dim": 16, "model.heads": 1, "model.layers": 1, "model.epochs": 30,
         "model.eval_every": 5, "model.lr": 1e-2}


def _options(tmp_path: Path, learn: bool, publish_every_s: float) -> Options:
    return Options(
        interactions=_cycles(tmp_path), clock=Clock(rate=20.0, lead_s=0.0, pipeline_s=0.0),
        learn=learn, publish_every_s=publish_every_s, arms=("popularity", "frozen", "model"),
        serve={"encoder_cpu_runtime": "torchscript"}, train=_TINY,
    )


def test_with_learning_off_the_model_arm_answers_as_the_frozen_one(tmp_path: Path) -> None:
    out = run(tmp_path / "out.json", _options(tmp_path, learn=False, publish_every_s=1.0))
    arms = out["counterfactual"]["arms"]
    assert out["versions_published"] == 1
    assert arms["model"] == arms["frozen"]
    assert arms["popularity"]["popularity_share"] == 1.0
    # The cycle is learnable from the pre-training half: the model beats popularity.
    assert arms["frozen"]["hit@10"] > arms["popularity"]["hit@10"]
    saved = json.loads((tmp_path / "out.json").read_text())
    assert set(saved["arms"]) == {"popularity", "frozen", "model"}
    assert {"ratio", "ci95"} <= set(saved["ratios"]["model_vs_popularity"])


def test_the_trainer_publishes_versions_the_model_arm_then_serves(tmp_path: Path) -> None:
    options = replace(_options(tmp_path, learn=True, publish_every_s=1.0),
                      train={**_TINY, "gate_min_events": 10, "gate_margin": 1.0})
    out = run(tmp_path / "out.json", options)
    # More versions than the log keeps as fallbacks: the oldest are retired on the way.
    assert out["versions_published"] > FALLBACK_VERSIONS + 1
    assert out["counterfactual"]["arms"]["model"]["answers"] == out["replayed_events"]


def test_until_a_ranker_is_published_the_ranker_arm_answers_in_retrieval_order(
    tmp_path: Path,
) -> None:
    options = replace(_options(tmp_path, learn=True, publish_every_s=5.0),
                      arms=("popularity", "model", "ranker"),
                      train={**_TINY, "ranker_min_lists": 100_000})
    out = run(tmp_path / "out.json", options)
    arms = out["counterfactual"]["arms"]
    assert arms["ranker"] == arms["model"]
    assert out["ranker"]["labelled_lists"] > 0 and out["ranker"]["promotions"] == 0
