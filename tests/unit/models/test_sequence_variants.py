"""The session Transformer's training variants: masked-item objective, reversed pre-training,
non-item pages as virtual items."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from models.evaluation import VARIANTS, evaluate_dataset
from models.item_content import ItemContent
from models.sequence_training import SessionTrainer, masked_batch, reversed_sequences
from models.sequences import Queries, UserSequences
from models.session_config import SessionTransformerConfig
from models.session_transformer import MASK_ID, SessionTransformer
from models.virtual_items import GenrePages

SMALL = SessionTransformerConfig(dim=32, heads=2, layers=1, max_len=16, dropout=0.0, lr=5e-3,
                                 batch_size=16, warmup_frac=0.0, eval_every=5, patience=5)


def _cyclic(n_users: int, n_items: int, length: int) -> UserSequences:
    rng = np.random.default_rng(0)
    items, times = [], []
    for _ in range(n_users):
        start = int(rng.integers(0, n_items))
        items.append((start + np.arange(length)) % n_items + 1)
        times.append(np.arange(length) * 60)
    return UserSequences(items, times, n_items)


def _queries(train: UserSequences, n: int) -> Queries:
    return Queries([s[:-1] for s in train.items[:n]], [t[:-1] for t in train.times[:n]],
                   np.array([10_000] * n), np.array([int(s[-1]) for s in train.items[:n]]))


def test_masked_batches_predict_exactly_the_masked_items_without_their_gaps() -> None:
    rng = np.random.default_rng(0)
    seqs = [np.arange(1, 11), np.arange(3, 7)]
    batch = masked_batch(seqs, [np.arange(10) * 60, np.arange(4) * 60], 16, 0.3, rng)
    for row, seq in enumerate(seqs):
        n = len(seq)
        masked = batch.items[row, :n] == MASK_ID
        assert bool(masked.any())
        assert batch.targets[row, :n, 0][masked].tolist() == torch.as_tensor(seq)[masked].tolist()
        assert int(batch.targets[row, :n, 0][~masked].abs().sum()) == 0
        assert batch.items[row, :n][~masked].tolist() == torch.as_tensor(seq)[~masked].tolist()
        assert bool((batch.gaps[row, :n][masked] == -1).all())


def test_the_masked_model_attends_both_ways_and_never_to_padding() -> None:
    model = SessionTransformer(10, SMALL.model_copy(update={"objective": "masked"})).eval()
    items = torch.tensor([[1, 2, MASK_ID, 4, 0]])
    gaps = torch.tensor([[-1, 5, -1, 5, -1]])
    later = items.clone()
    later[0, 3] = 7
    a, b = model(items, gaps), model(later, gaps)
    assert not torch.allclose(a[0, 2], b[0, 2])  # the masked position sees the items after it
    with_padding = torch.cat([items, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    c = model(with_padding, torch.cat([gaps, torch.full((1, 3), -1)], dim=1))
    assert torch.allclose(a[0, :4], c[0, :4], atol=1e-5)


def test_the_masked_objective_learns_a_successor_pattern() -> None:
    train = _cyclic(n_users=64, n_items=20, length=12)
    queries = _queries(train, 16)
    config = SMALL.model_copy(update={"epochs": 40, "objective": "masked", "mask_prob": 0.3})
    trainer = SessionTrainer(20, config, torch.device("cpu"))
    trainer.fit(train, queries)
    assert trainer.evaluate(queries)["hr@10"] >= 0.9


def test_reversed_sequences_run_back_to_front_with_positive_gaps() -> None:
    train = UserSequences([np.array([3, 1, 2])], [np.array([100, 160, 400])], 3)
    back = reversed_sequences(train)
    assert back.items[0].tolist() == [2, 1, 3]
    assert back.times[0].tolist() == [0, 240, 300]


def test_reverse_pretraining_then_forward_training_still_learns_the_pattern() -> None:
    train = _cyclic(n_users=64, n_items=20, length=12)
    queries = _queries(train, 16)
    config = SMALL.model_copy(update={"epochs": 30, "reverse_pretrain_epochs": 5})
    trainer = SessionTrainer(20, config, torch.device("cpu"))
    trainer.fit(train, queries)
    assert trainer.evaluate(queries)["hr@10"] == 1.0


def _content() -> ItemContent:
    items = pd.DataFrame({
        "item_id": ["a", "b", "c", "d"], "release_year": [1990.0] * 4,
        "genres": [("drama",), ("drama",), ("comedy",), ()],
    })
    return ItemContent.from_frame(items, ["a", "b", "c", "d"])


def test_a_genre_page_follows_each_change_of_genre_at_the_items_time() -> None:
    pages = GenrePages(_content(), n_items=4)
    assert pages.pages == 2  # comedy = page 0 (row 5), drama = page 1 (row 6)
    items, times = pages.insert(np.array([1, 2, 3, 4, 1]), np.array([10, 20, 30, 40, 50]))
    assert items.tolist() == [1, 6, 2, 3, 5, 4, 1, 6]
    assert times.tolist() == [10, 10, 20, 30, 30, 40, 50, 50]


def test_virtual_items_are_never_scored_nor_targets() -> None:
    pages = GenrePages(_content(), n_items=4)
    train = pages.sequences(UserSequences([np.array([1, 3, 2, 4, 3, 1])] * 8,
                                          [np.arange(6) * 60] * 8, 4))
    assert train.n_items == 6
    config = SMALL.model_copy(update={"epochs": 2, "virtual_items": 2})
    trainer = SessionTrainer(train.n_items, config, torch.device("cpu"))
    trainer.fit(train)
    queries = pages.queries(Queries([np.array([1, 3])], [np.array([0, 60])], np.array([120]),
                                    np.array([2])))
    assert trainer.score(queries).shape == (1, 5)  # padding + the 4 items, no page column


def test_variant_rows_compare_paired_with_the_transformer() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for user in range(30):
        start = int(rng.integers(0, 12))
        rows += [(f"u{user}", f"i{(start + s) % 12}", 1_000 * user + 60 * s) for s in range(8)]
    frame = pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"])
    items = pd.DataFrame({
        "item_id": [f"i{j}" for j in range(12)], "release_year": [1990.0] * 12,
        "genres": [("drama",) if j % 3 else ("comedy",) for j in range(12)],
    })
    config = SessionTransformerConfig(dim=16, heads=2, layers=1, max_len=8, epochs=4,
                                      eval_every=2, batch_size=8)
    report = evaluate_dataset("synthetic", frame, config, items=items, rankers=[], variants=True)
    transformer = report["models"]["session_transformer"]
    for name in VARIANTS:
        row = report["models"][name]
        versus = row["vs_transformer"]
        assert versus["ratio"] == pytest.approx(row["ndcg@10"] / transformer["ndcg@10"])
        low, high = versus["ci95"]
        assert low <= versus["ndcg@10_diff"] <= high
    json.loads(json.dumps(report))
