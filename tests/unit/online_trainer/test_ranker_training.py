"""Ranker examples in micro-batches -> gate -> stored version -> the scorer's ranker slot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from prometheus_client import REGISTRY

from models.logged_ranker import GateDecision
from models.store import ModelStore
from online_trainer.metrics import TrainerMetrics
from online_trainer.ranker_training import RankerTraining
from serving.ranker_slot import RankerSlot
from tests.unit.online_trainer.helpers import T0, ranker_examples, train_ranker


def test_a_ranker_that_beats_retrieval_is_stored_published_and_served(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    training = RankerTraining(store, held_back=100, gate_every=2, min_lists=50)
    for epoch in range(6):
        train_ranker(training, ranker_examples(300, seed=epoch))
    assert training.decisions and training.decisions[-1].promote, training.decisions
    update = training.published[-1]
    assert update.model_name == "ranker" and update.stage == "serving"
    assert update.sha256 == store.digest("ranker", update.version)
    assert update.metrics["ranker_ndcg@10"] > update.metrics["retrieval_ndcg@10"]
    slot = RankerSlot(store, "ranker")
    assert slot.apply(update)
    served = slot.current()
    assert served is not None and served.version == update.version
    vectors = ranker_examples(1, seed=99)[0].matrix()
    np.testing.assert_array_equal(served.model.score(vectors), training.ranker.score(vectors))
    assert served.reranks("1.0") and served.reranks("1.7") and not served.reranks("2.0")


def test_the_gate_judges_only_lists_of_the_newest_retrieval_major(tmp_path: Path) -> None:
    training = RankerTraining(ModelStore(tmp_path), held_back=400, gate_every=1, min_lists=50)
    training.step(ranker_examples(300, seed=0), now=T0)  # retriever 1.x: all held back
    step = training.step(ranker_examples(40, seed=1, model_version="2.0"), now=T0)
    assert step.decision is not None and step.decision.lists == 40  # not 340
    assert not step.decision.promote and "need 50" in step.decision.reason


def test_one_list_in_held_back_every_waits_for_the_gate_and_the_others_train_at_once(
    tmp_path: Path,
) -> None:
    training = RankerTraining(ModelStore(tmp_path), held_back=1000, held_back_every=5,
                              gate_every=1, min_lists=50)
    examples = ranker_examples(400, seed=0)
    held = [e for e in examples if training.holds_back(e.request_id)]
    assert 50 <= len(held) <= 110  # about one in five, by the request id's hash
    again = RankerTraining(ModelStore(tmp_path / "again"), held_back_every=5)
    assert held == [e for e in examples if again.holds_back(e.request_id)]
    step = training.step(examples, now=T0)
    assert step.trained_lists == len(examples) - len(held)
    assert step.decision is not None and step.decision.lists == len(held)
    # Past `held_back` held lists, the oldest leave the set and train too.
    small = RankerTraining(ModelStore(tmp_path / "small"), held_back=20, held_back_every=5,
                           gate_every=1, min_lists=10)
    step = small.step(examples, now=T0)
    assert step.trained_lists == len(examples) - 20
    assert step.decision is not None and step.decision.lists == 20


def test_without_a_signal_nothing_is_published(tmp_path: Path) -> None:
    training = RankerTraining(ModelStore(tmp_path), held_back=100, gate_every=2, min_gain=0.02)
    for epoch in range(3):
        train_ranker(training, ranker_examples(300, seed=epoch, signal=False))
    assert training.decisions and not any(d.promote for d in training.decisions)
    assert training.published == [] and ModelStore(tmp_path).latest("ranker") is None


def test_examples_of_another_feature_set_are_rejected_for_the_dead_letters(
    tmp_path: Path,
) -> None:
    training = RankerTraining(ModelStore(tmp_path))
    step = training.step(ranker_examples(3, seed=1, feature_set="old-set"))
    assert len(step.rejected) == 3 and step.trained_lists == 0


def test_the_slot_refuses_a_tampered_version_and_keeps_retrieval_order(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    training = RankerTraining(store, held_back=100, gate_every=2, min_lists=50)
    for epoch in range(6):
        train_ranker(training, ranker_examples(300, seed=epoch))
    update = training.published[-1]
    rejected: list[str] = []
    slot = RankerSlot(store, "ranker", lambda u, e: rejected.append(type(e).__name__))
    assert not slot.apply(update.model_copy(update={"sha256": "0" * 64}))
    assert slot.current() is None and rejected == ["IntegrityError"]
    # A version that verifies serves; when a newer one fails, the scorer stays on it.
    assert len(training.published) >= 2, "the gate promoted twice"
    older, newest = training.published[-2], training.published[-1]
    assert slot.apply(older) and slot.current().version == older.version  # type: ignore[union-attr]
    assert not slot.apply(newest.model_copy(update={"sha256": "0" * 64}))
    assert slot.current().version == older.version  # type: ignore[union-attr]


def test_gate_runs_are_counted_by_outcome_with_the_last_gain() -> None:
    def count(outcome: str) -> float:
        value = REGISTRY.get_sample_value(
            "streamrec_trainer_ranker_gate_decisions_total", {"outcome": outcome}
        )
        assert value is not None  # both outcomes are exported before any gate run
        return value

    before = {outcome: count(outcome) for outcome in ("promote", "refuse")}
    metrics = TrainerMetrics()
    metrics.observe_ranker_gate(GateDecision(False, 0.20, 0.25, 60, "does not beat retrieval"))
    metrics.observe_ranker_gate(GateDecision(True, 0.30, 0.25, 60, "beats retrieval order"))
    metrics.observe_ranker_gate(GateDecision(False, float("nan"), float("nan"), 0, "no lists"))
    assert count("refuse") - before["refuse"] == 2
    assert count("promote") - before["promote"] == 1
    gain = REGISTRY.get_sample_value("streamrec_trainer_ranker_gate_gain")
    assert gain == pytest.approx(0.05)
