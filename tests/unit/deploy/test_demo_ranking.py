"""The demo's ranker figures: KPI per serving strategy and the ranker gate's decisions."""

from __future__ import annotations

from deploy.demo.ranking import (
    GATE_DECISIONS,
    GATE_GAIN,
    Credit,
    gate_decisions,
    strategy_kpi,
)
from schemas import ModelUpdate


def _update(name: str, version: str, at: float, metrics: dict[str, float]) -> ModelUpdate:
    return ModelUpdate(model_name=name, version=version, kind="full", sha256="0" * 64,
                       published_at=at, metrics=metrics)


def test_strategy_kpi_counts_answers_and_hits_per_strategy_overall_and_per_phase() -> None:
    credits = [Credit(at, strategy, hit) for at, strategy, hit in [
        (1.0, "model", True), (2.0, "model", False), (3.0, "popularity", True),
        (11.0, "ranker", True), (12.0, "ranker", False), (13.0, "model", False),
        (14.0, "ranker", False), (15.0, "ranker", True),
    ]]
    spans = {"before_drift": (0.0, 10.0), "after_drift": (10.0, 20.0)}
    assert strategy_kpi(credits, spans) == {
        "all": {"model": {"responses": 3, "hits": 1, "hit_rate": 0.3333},
                "popularity": {"responses": 1, "hits": 1, "hit_rate": 1.0},
                "ranker": {"responses": 4, "hits": 2, "hit_rate": 0.5}},
        "before_drift": {"model": {"responses": 2, "hits": 1, "hit_rate": 0.5},
                         "popularity": {"responses": 1, "hits": 1, "hit_rate": 1.0}},
        "after_drift": {"model": {"responses": 1, "hits": 0, "hit_rate": 0.0},
                        "ranker": {"responses": 4, "hits": 2, "hit_rate": 0.5}},
    }


def test_a_phase_without_answers_has_no_strategies() -> None:
    credits = [Credit(5.0, "model", True)]
    assert strategy_kpi(credits, {"after_recovery": (10.0, 20.0)})["after_recovery"] == {}


def test_gate_decisions_list_ranker_promotions_with_gain_and_count_refusals() -> None:
    updates = [
        _update("session", "2.0", 1.7e9 + 50.0, {}),
        _update("ranker", "1.0", 1.7e9 + 30.0, {"ranker_ndcg@10": 0.31, "retrieval_ndcg@10": 0.25,
                                         "held_back_lists": 80.0}),
    ]
    samples = {f'{GATE_DECISIONS}{{outcome="promote"}}': 1.0,
               f'{GATE_DECISIONS}{{outcome="refuse"}}': 6.0, GATE_GAIN: -0.01}
    assert gate_decisions(updates, samples, "ranker", origin=1.7e9) == {
        "promoted": [{"version": "1.0", "at_s": 30.0, "ranker_ndcg10": 0.31,
                      "retrieval_ndcg10": 0.25, "gain": 0.06, "held_back_lists": 80}],
        "gate_runs": 7, "refused": 6, "last_gain": -0.01,
    }


def test_gate_decisions_without_trainer_metrics_leave_counts_unknown() -> None:
    decisions = gate_decisions([], {}, "ranker", origin=0.0)
    assert decisions == {"promoted": [], "gate_runs": None, "refused": None, "last_gain": None}
