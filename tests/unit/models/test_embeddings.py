"""Fused embedding table: admission, growth, eviction, tiering and optimizer state."""

from __future__ import annotations

import math

import pytest
import torch

from models.embeddings import EmbeddingConfig, FusedEmbedding, padded_width
from models.sequence_training import SessionTrainer
from models.session_config import SessionTransformerConfig


def _train_step(table: FusedEmbedding, rows: torch.Tensor) -> None:
    vectors = table.gather(rows)
    (vectors.sum(dim=1) ** 2).sum().backward()  # type: ignore[no-untyped-call]
    assert vectors.grad is not None
    table.apply_gradients(rows, vectors.grad)


def test_growth_keeps_existing_rows_and_optimizer_state() -> None:
    table = FusedEmbedding(["item"], EmbeddingConfig(dim=8, initial_rows=4))
    first = table.lookup("item", [f"i{k}" for k in range(4)], now=0.0)
    _train_step(table, first)
    weights_before, acc_before = table.rows(first)
    assert (acc_before > table.config.initial_accumulator).all()  # the step really updated state

    many = table.lookup("item", [f"j{k}" for k in range(100)], now=1.0)  # forces growth

    weights_after, acc_after = table.rows(first)
    assert torch.equal(weights_before, weights_after)
    assert torch.equal(acc_before, acc_after)
    _, fresh_acc = table.rows(many)
    assert torch.allclose(fresh_acc, torch.full_like(fresh_acc, table.config.initial_accumulator))


def test_distinct_ids_never_share_a_row() -> None:
    table = FusedEmbedding(["item", "category"], EmbeddingConfig(dim=4, initial_rows=2))
    items = table.lookup("item", [str(k) for k in range(50)], now=0.0)
    categories = table.lookup("category", [str(k) for k in range(50)], now=0.0)
    all_rows = torch.cat([items, categories]).tolist()
    assert len(set(all_rows)) == 100
    assert torch.equal(table.lookup("item", ["7"], now=1.0), items[7:8])


def test_ids_below_min_count_share_the_unknown_row_until_admitted() -> None:
    table = FusedEmbedding(["item"], EmbeddingConfig(dim=4, min_count=3))
    unknown = table.unknown_rows["item"]
    assert table.lookup("item", ["a"], now=0.0).item() == unknown
    assert table.lookup("item", ["a"], now=1.0).item() == unknown
    admitted = table.lookup("item", ["a"], now=2.0).item()
    assert admitted != unknown
    assert table.lookup("item", ["a"], now=3.0).item() == admitted


def test_ttl_eviction_recycles_rows_with_fresh_state() -> None:
    table = FusedEmbedding(["item"], EmbeddingConfig(dim=4, ttl_s=10.0))
    old = table.lookup("item", ["old"], now=0.0)
    _train_step(table, old)
    table.lookup("item", ["recent"], now=15.0)
    assert table.evict_expired(now=20.0) == 1
    assert ("item", "old") not in table.ids
    reused = table.lookup("item", ["newcomer"], now=21.0)
    assert reused.item() == old.item()  # slot recycled, table did not grow
    _, acc = table.rows(reused)
    assert acc.item() == pytest.approx(table.config.initial_accumulator)


def test_cold_rows_stay_in_host_memory_and_hot_rows_get_promoted() -> None:
    table = FusedEmbedding(["item"], EmbeddingConfig(dim=4, hot_capacity=4))
    raw = [str(k) for k in range(10)]
    rows = table.lookup("item", raw, now=0.0)
    assert int(table.is_hot(torch.arange(table.n_rows)).sum()) == 4
    cold_raw = [r for r, hot in zip(raw, table.is_hot(rows).tolist(), strict=True) if not hot][:2]
    cold = table.lookup("item", cold_raw, now=0.5)
    _train_step(table, cold)
    weights_before, acc_before = table.rows(cold)
    for t in range(5):
        table.lookup("item", cold_raw, now=float(t + 1))

    assert table.rebalance() >= 2
    assert table.is_hot(cold).all()
    weights_after, acc_after = table.rows(cold)
    assert torch.equal(weights_before, weights_after)
    assert torch.equal(acc_before, acc_after)
    assert int(table.is_hot(torch.arange(table.n_rows)).sum()) == 4


def test_sparse_adagrad_moves_only_touched_rows() -> None:
    table = FusedEmbedding(["item"], EmbeddingConfig(dim=4, hot_capacity=2))
    rows = table.lookup("item", ["a", "b", "c", "d"], now=0.0)
    before, _ = table.rows(rows)
    _train_step(table, rows[[0, 3, 3]])  # a hot row and a cold one, with a duplicate
    after, _ = table.rows(rows)
    changed = (before != after).any(dim=1).tolist()
    assert changed == [True, False, False, True]


def test_widths_are_padded_to_16_byte_multiples() -> None:
    assert padded_width(1) == 4
    assert padded_width(64) == 64
    assert padded_width(30) == 32
    assert padded_width(30, itemsize=2) == 32
    table = FusedEmbedding(["item"], EmbeddingConfig(dim=10))
    assert table.width * 4 % 16 == 0
    assert table.gather(table.lookup("item", ["x"], now=0.0)).shape == (1, 12)


def test_transformer_item_growth_keeps_rows_and_adam_moments() -> None:
    config = SessionTransformerConfig(dim=16, heads=2, layers=1, max_len=8, dropout=0.0)
    trainer = SessionTrainer(n_items=5, config=config, device=torch.device("cpu"))
    seqs = [torch.tensor([1, 2, 3, 4, 5]).numpy()]
    times = [torch.arange(5).numpy()]
    trainer.partial_fit(seqs, times)
    weight = trainer.model.item_embedding.weight
    rows_before = weight.detach().clone()
    moments_before = trainer.optimizer.state[weight]["exp_avg"].clone()

    trainer.grow_items(9)

    weight = trainer.model.item_embedding.weight
    assert weight.shape[0] == 10
    assert torch.equal(weight[:6].detach(), rows_before)
    state = trainer.optimizer.state[weight]
    assert torch.equal(state["exp_avg"][:6], moments_before)
    assert torch.count_nonzero(state["exp_avg"][6:]) == 0
    loss = trainer.partial_fit([torch.tensor([6, 7, 8, 9]).numpy()], [torch.arange(4).numpy()])
    assert math.isfinite(loss)  # the grown parameter trains with its grown state
