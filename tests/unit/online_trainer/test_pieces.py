from __future__ import annotations

import math

import pytest

from online_trainer.gate import ValidationGate
from online_trainer.histories import UserHistories
from online_trainer.ledger import OffsetLedger
from online_trainer.online_model import OnlineModel
from online_trainer.prequential import MISS, RunningMetrics
from online_trainer.vocabulary import IdVocabulary
from tests.unit.online_trainer.helpers import TINY


def test_vocabulary_admits_on_first_sight_without_collisions_and_never_moves_rows() -> None:
    vocab = IdVocabulary()
    assert vocab.admit_all(["a", "b", "a", "c"]) == [1, 2, 1, 3]
    assert vocab.get("zzz") == 0
    again = IdVocabulary(vocab.mapping())
    assert again.admit("d") == 4
    assert [again.id_of(r) for r in (1, 2, 3, 4)] == ["a", "b", "c", "d"]


def test_vocabulary_rejects_a_mapping_with_gaps() -> None:
    with pytest.raises(ValueError, match="without gaps"):
        IdVocabulary({"a": 1, "b": 3})


def test_histories_keep_the_last_events_and_evict_the_least_recent_user() -> None:
    histories = UserHistories(max_len=3, max_users=2)
    for t, item in enumerate([1, 2, 3, 4]):
        histories.append("u1", item, t)
    histories.append("u2", 9, 10)
    histories.append("u1", 5, 11)  # u1 becomes the most recent
    histories.append("u3", 7, 12)  # evicts u2
    items, times = histories.get("u1")
    assert items.tolist() == [3, 4, 5] and times.tolist() == [2, 3, 11]
    assert len(histories.get("u2")[0]) == 0
    users, arrays = histories.to_arrays()
    restored = UserHistories.from_arrays(users, arrays, {}, 3, 2)
    assert restored.get("u1")[0].tolist() == [3, 4, 5]
    assert restored.get("u1")[1].tolist() == [2, 3, 11]
    restored.append("u4", 1, 13)  # u1 is older than u3 there too: it goes first
    assert len(restored.get("u1")[0]) == 0 and len(restored.get("u3")[0]) == 1


def test_histories_a_checkpoint_kept_as_json_still_restore() -> None:
    state = {"users": {"u1": [[3, 4], [2, 3], [0, 0]]}, "row_generations": {"4": 1}}
    restored = UserHistories.from_state(state, 3, 2)
    assert restored.get("u1")[0].tolist() == [3]  # row 4 was recycled after that entry


def test_ledger_merges_contiguous_batches_and_flags_overlaps_and_gaps() -> None:
    ledger = OffsetLedger()
    ledger.record(0, 0, 9)
    ledger.record(0, 10, 19)
    ledger.record(1, 0, 4)
    assert ledger.ranges == {0: [[0, 19]], 1: [[0, 4]]}
    assert (ledger.overlaps, ledger.gaps, ledger.trained_count()) == (0, 0, 25)
    ledger.record(0, 15, 25)
    ledger.record(1, 8, 9)
    assert (ledger.overlaps, ledger.gaps) == (1, 1)
    assert OffsetLedger.from_state(ledger.to_state()) == ledger


def test_running_metrics_hand_computed() -> None:
    metrics = RunningMetrics(window=2)
    metrics.add([1.0, 3.0, MISS])
    summary = metrics.summary()
    assert summary["hr@10"] == pytest.approx(2 / 3)
    assert summary["ndcg@10"] == pytest.approx((1.0 + 1 / math.log2(4)) / 3)
    assert metrics.recent()["hr@10"] == pytest.approx(0.5)


def test_gate_holds_a_worse_candidate_and_publishes_within_the_margin() -> None:
    gate = ValidationGate("hr@10", margin=0.05, window=100, min_events=4)
    assert gate.decide(has_serving=False).publish
    gate.observe([1, 1], [1, 1])
    assert not gate.decide(has_serving=True).publish  # too few held-out events
    gate.observe([MISS, MISS, MISS, 1], [1, 1, 1, 1])
    held = gate.decide(has_serving=True)
    assert not held.publish and held.candidate < held.serving
    gate.reset_serving()
    gate.observe([1, 1, 1, MISS], [1, 1, 1, 1])
    gate.observe([1] * 16, [1] * 16)
    assert gate.decide(has_serving=True).publish  # 0.95 vs 1.0: inside the 0.05 margin


def test_gate_refuses_windows_of_different_events() -> None:
    with pytest.raises(ValueError, match="same events"):
        ValidationGate("hr@10", 0.0, 10, 1).observe([1.0], [])


def test_online_tuning_sets_the_streaming_rates_and_the_learning_context() -> None:
    model = OnlineModel(TINY, context=5)
    model.tune_online(train_context=50, dense_lr=3e-4, item_lr=1e-3)
    assert model.train_context == TINY.max_len  # capped by what the encoder reads
    assert [g["lr"] for g in model.trainer.optimizer.param_groups] == [3e-4, 1e-3]
    model.tune_online(train_context=8, dense_lr=None, item_lr=None)
    assert model.train_context == 8
    assert [g["lr"] for g in model.trainer.optimizer.param_groups] == [3e-4, 1e-3]


def test_gate_is_ready_again_only_after_min_events_new_held_out_events() -> None:
    gate = ValidationGate("hr@10", margin=0.0, window=100, min_events=4)
    assert gate.ready(has_serving=False)  # nothing to compare against: decide at once
    gate.observe([1, 1, 1], [1, 1, 1])
    assert not gate.ready(has_serving=True)
    gate.observe([MISS], [1])
    assert gate.ready(has_serving=True)
    assert not gate.decide(has_serving=True).publish
    gate.observe([1, 1, 1], [1, 1, 1])
    assert not gate.ready(has_serving=True)  # a held candidate waits for new evidence
    gate.observe([1], [1])
    assert gate.ready(has_serving=True)
    gate.reset_serving()
    assert not gate.ready(has_serving=True)


def test_a_histories_copy_is_independent_and_reads_the_same() -> None:
    histories = UserHistories(max_len=3, max_users=10)
    for t, (user, item) in enumerate([("a", 1), ("a", 2), ("b", 3), ("a", 4), ("a", 5)]):
        histories.append(user, item, t)
    histories.forget_rows([4])
    twin = histories.copy()
    for user in ("a", "b"):
        assert [list(x) for x in twin.get(user)] == [list(x) for x in histories.get(user)]
    twin.append("a", 6, 9)
    twin.forget_rows([5])
    assert list(histories.get("a")[0]) == [2, 5] and list(twin.get("a")[0]) == [6]
