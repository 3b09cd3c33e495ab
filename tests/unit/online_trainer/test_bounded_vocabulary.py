"""The trainer's bounded id space: admission after min_count sightings, least-recently-seen
eviction, recycled rows starting afresh, and all of it surviving a checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from models.store import ModelStore
from online_trainer.checkpoint import CheckpointStore, TrainerState
from online_trainer.histories import UserHistories
from online_trainer.online_model import Interaction, OnlineModel
from online_trainer.vocabulary import IdVocabulary, VocabularyLimits
from tests.unit.online_trainer.helpers import TINY, envelopes
from tests.unit.online_trainer.test_online_trainer import _trainer


def _one_to_one(mapping: dict[str, int]) -> bool:
    return sorted(mapping.values()) == list(range(1, len(mapping) + 1))


def test_an_id_gets_a_row_only_at_its_min_count_th_sighting() -> None:
    vocab = IdVocabulary(limits=VocabularyLimits(min_count=3))
    assert vocab.admit_all(["a", "b", "a", "b"]) == [0, 0, 0, 0]
    assert vocab.get("a") == 0 and "a" not in vocab
    assert vocab.admit("a") == 1
    assert vocab.admit_all(["b", "a"]) == [2, 1]
    assert vocab.mapping() == {"b": 2, "a": 1}


def test_counted_sightings_are_bounded_and_the_least_recent_forgotten() -> None:
    vocab = IdVocabulary(limits=VocabularyLimits(min_count=2, max_rows=2))
    assert vocab.admit_all(["x", "y", "z"]) == [0, 0, 0]  # x's sighting is dropped
    assert vocab.sightings() == {"y": 1, "z": 1}
    assert vocab.admit("x") == 0
    assert vocab.admit("z") == 1


def test_when_full_the_least_recently_seen_id_gives_up_its_row() -> None:
    vocab = IdVocabulary(limits=VocabularyLimits(max_rows=3))
    assert vocab.admit_all(["a", "b", "c", "a", "b"]) == [1, 2, 3, 1, 2]
    assert vocab.admit("d") == 3  # c was seen least recently
    assert "c" not in vocab and vocab.get("c") == 0
    assert vocab.id_of(3) == "d"
    assert vocab.take_recycled() == {3: "c"}
    assert vocab.take_recycled() == {}
    assert vocab.admit("c") == 1  # back as a new id, in the row of a (now least recent)
    assert vocab.mapping() == {"b": 2, "d": 3, "c": 1}
    assert _one_to_one(vocab.mapping())


def test_the_mapping_stays_one_to_one_under_a_long_tail_of_ids() -> None:
    vocab = IdVocabulary(limits=VocabularyLimits(min_count=2, max_rows=50))
    rng = torch.Generator().manual_seed(0)
    for raw in torch.randint(0, 400, (5000,), generator=rng).tolist():
        vocab.admit(f"i{raw}")
        assert len(vocab) <= 50
    mapping = vocab.mapping()
    assert len(mapping) == 50 and _one_to_one(mapping)
    assert all(vocab.id_of(row) == raw for raw, row in mapping.items())


def test_histories_leave_out_the_entries_of_a_recycled_row() -> None:
    histories = UserHistories(max_len=5, max_users=10)
    for t, row in enumerate([1, 2, 3]):
        histories.append("u", row, t)
    histories.forget_rows([2])
    assert histories.get("u")[0].tolist() == [1, 3]
    histories.append("u", 2, 9)  # row 2 now names another item: this entry is current
    assert histories.get("u")[0].tolist() == [1, 3, 2]
    assert histories.get("u")[1].tolist() == [0, 2, 9]
    histories.forget_rows([2])
    assert histories.last_item("u") == 0
    users, arrays = histories.to_arrays()
    restored = UserHistories.from_arrays(users, arrays, histories.row_generations(), 5, 10)
    assert restored.get("u")[0].tolist() == [1, 3]
    assert restored.last_item("u") == 0


def test_a_recycled_row_starts_with_fresh_weights_and_optimiser_state() -> None:
    limits = VocabularyLimits(max_rows=3)
    model = OnlineModel(TINY, IdVocabulary(limits=limits))
    for _ in range(3):
        model.learn([Interaction("u", "a", 1), Interaction("u", "b", 2), Interaction("v", "c", 3)])
    model.learn([Interaction("w", "a", 4), Interaction("w", "b", 5)])
    weight, bias = model.trainer.model.item_embedding.weight, model.trainer.model.item_bias
    state = model.trainer.optimizer.state[weight]
    row = model.items.get("c")
    learned = weight[row].detach().clone()
    assert state["exp_avg"][row].abs().sum() > 0 and bias[row] != 0
    assert model.items.admit_all(["d"]) == [row]
    model.ensure_capacity()
    assert not torch.equal(weight[row].detach(), learned)
    assert bias[row] == 0
    assert state["exp_avg"][row].abs().sum() == 0 and state["exp_avg_sq"][row].abs().sum() == 0
    assert row not in model.histories.get("v")[0].tolist()
    assert model.items.mapping().keys() == {"a", "b", "d"}


def test_the_table_stops_growing_at_the_bound() -> None:
    model = OnlineModel(TINY, IdVocabulary(limits=VocabularyLimits(max_rows=40)))
    model.learn([Interaction("u", f"i{n}", n) for n in range(2000)], steps=0)
    assert len(model.items) == 40
    assert model.trainer.model.n_items <= 40 + 1024  # the first allocation, never regrown


def test_rare_ids_are_neither_history_nor_target() -> None:
    model = OnlineModel(TINY, IdVocabulary(limits=VocabularyLimits(min_count=2)))
    model.learn([Interaction("u", "a", 1), Interaction("u", "b", 2), Interaction("u", "a", 3)])
    assert model.histories.get("u")[0].tolist() == [model.items.get("a")]
    assert "b" not in model.items


def test_checkpoint_round_trip_keeps_recency_sightings_and_recycled_histories(
    tmp_path: Path,
) -> None:
    limits = VocabularyLimits(min_count=2, max_rows=3)
    vocab = IdVocabulary(limits=limits)
    vocab.admit_all(["a", "a", "b", "b", "c", "c", "a", "rare"])  # recency: b, c, a
    histories = UserHistories(max_len=5, max_users=10)
    histories.append("u", 2, 1)
    histories.forget_rows([2])
    store = CheckpointStore(tmp_path)
    store.save({"w": torch.zeros(1)}, {}, vocab, histories, TrainerState())
    _, _, loaded, restored, _ = store.load(5, 10, limits)
    assert loaded.mapping() == vocab.mapping()
    assert list(loaded.mapping()) == ["b", "c", "a"]
    assert loaded.sightings() == {"rare": 1}
    assert loaded.limits == limits
    assert loaded.admit("rare") == vocab.admit("rare") == 2  # both evict b
    assert restored.get("u")[0].tolist() == []


@pytest.mark.parametrize("max_rows", [25])
def test_published_id_maps_are_one_to_one_and_drop_evicted_ids(
    tmp_path: Path, max_rows: int
) -> None:
    trainer, _ = _trainer(tmp_path, item_max_rows=max_rows)
    stream = envelopes(1500, items=60)
    trainer.train_batch(stream[:700])
    assert trainer.maybe_publish().publish
    trainer.train_batch(stream[700:])
    latest = trainer.publish(None, major=False).update
    _, manifest = ModelStore(tmp_path / "store").load(
        "session_transformer", latest.version, latest.sha256
    )
    served = manifest.id_maps["item"]
    assert len(served) == max_rows and _one_to_one(served)
    assert served == trainer.model.items.mapping()
    seen = {e.record.item_id for e in stream}
    assert len(seen) > max_rows  # some ids were evicted and none of them is served
