"""The demo's ranker gate decisions, as the run's summary reports them."""

from __future__ import annotations

from deploy.demo.ranking import GATE_DECISIONS, GATE_GAIN, gate_decisions
from schemas import ModelUpdate


def _update(name: str, version: str, at: float, metrics: dict[str, float]) -> ModelUpdate:
    return ModelUpdate(model_name=name, version=version, kind="full", sha256="0" * 64,
                       published_at=at, metrics=metrics)


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
