from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F  # noqa: N812 - torch convention
from torch.multiprocessing.spawn import spawn

from models.session_config import SessionTransformerConfig
from models.session_transformer import gap_buckets
from models.sharded_session import (
    INIT_BLOCK,
    SessionModule,
    ShardedSessionModel,
    TableOptimizer,
    apply_table_optimizer,
    assemble,
    initial_rows,
    table_shapes,
)
from models.sharding_plan import plan_tables

ITEMS, WORLD = 60, 2
CONFIG = SessionTransformerConfig(dim=16, heads=1, layers=1, max_len=6, dropout=0.0, seed=3)
# A step of rate 1 moves each row by minus its gradient, so the update is the gradient.
SGD = TableOptimizer("sgd", item_lr=1.0, lr=1.0)


def _inputs(rank: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each process's batch and upstream gradients (any process can rebuild every one)."""
    g = torch.Generator().manual_seed(rank)
    rows = 2 + rank  # the processes look up different numbers of rows
    items = torch.randint(0, ITEMS + 1, (rows, CONFIG.max_len), generator=g)
    gaps = torch.randint(-1, 5000, (rows, CONFIG.max_len), generator=g)
    up_hidden = torch.randn(rows, CONFIG.max_len, 16, generator=g)
    up_scores = torch.randn(rows, ITEMS + 1, generator=g)
    return items, gaps, up_hidden, up_scores


def _reference(tables: dict[str, torch.Tensor], module: SessionModule, rank: int) -> (
    tuple[torch.Tensor, torch.Tensor, torch.Tensor]
):
    """Hidden states, last-position scores and the loss, computed on whole tables."""
    items, gaps, up_hidden, up_scores = _inputs(rank)
    x = F.embedding(items, tables["item"]) * (items != 0).unsqueeze(-1) * math.sqrt(16)
    x = x + tables["position"][: items.shape[1]][None] + tables["gap"][gap_buckets(gaps)]
    hidden = module.encoder(x)
    scores = hidden[:, -1] @ tables["item"].T + tables["item_bias"][:, 0]
    return hidden, scores, (hidden * up_hidden).sum() + (scores * up_scores).sum()


def _check(rank: int, store: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    module = SessionModule(ITEMS, CONFIG)
    apply_table_optimizer(module, SGD)
    plan = plan_tables(module, WORLD, torch.device("cpu"), batch_size=4)
    model = ShardedSessionModel(module, plan.plan, torch.device("cpu"), CONFIG.seed)
    model.eval()
    start = model.state_dict()
    parts: list[dict[str, torch.Tensor] | None] = [None] * WORLD
    dist.all_gather_object(parts, start)
    shapes = table_shapes(ITEMS, CONFIG)
    whole = assemble([p for p in parts if p is not None], shapes)
    held = sum(v.numel() for k, v in start.items() if k.startswith("table."))
    assert held < sum(rows * columns for rows, columns in shapes.values())  # only its shards

    tables = {"item": whole["item_embedding.weight"].clone().requires_grad_(),
              "item_bias": torch.zeros(ITEMS + 1, 4).requires_grad_(),
              "position": whole["position_embedding.weight"].clone().requires_grad_(),
              "gap": whole["gap_embedding.weight"].clone().requires_grad_()}
    reference = SessionModule(ITEMS, CONFIG)
    reference.eval()
    items, gaps, up_hidden, up_scores = _inputs(rank)
    hidden = model(items, gaps)
    scores = model.logits(hidden[:, -1])
    expected_hidden, expected_scores, _ = _reference(tables, reference, rank)
    assert torch.allclose(hidden, expected_hidden, atol=1e-5)
    assert torch.allclose(scores, expected_scores, atol=1e-5)

    model.fused_optimizer.zero_grad()
    ((hidden * up_hidden).sum() + (scores * up_scores).sum()).backward()  # type: ignore[no-untyped-call]
    # TorchRec averages the table gradients over the processes, as DDP does the dense ones.
    total = sum(_reference(tables, reference, other)[2] for other in range(WORLD)) / WORLD
    total.backward()  # type: ignore[union-attr]
    after = model.state_dict()
    for key, before in start.items():
        if not key.startswith("table."):
            continue
        _, table, row, column = key.split(".")
        rows, columns = before.shape
        grad = tables[table].grad
        assert grad is not None
        expected = grad[int(row) : int(row) + rows, int(column) : int(column) + columns]
        assert torch.allclose(before - after[key], expected, atol=1e-4), key
    dist.destroy_process_group()


def test_sharded_lookups_and_scores_match_the_whole_tables_in_values_and_gradients(
    tmp_path: Path,
) -> None:
    spawn(_check, args=(str(tmp_path / "store"),), nprocs=WORLD, join=True)  # type: ignore[no-untyped-call]


def test_a_row_starts_with_the_same_values_however_the_table_is_split() -> None:
    whole = initial_rows(0, 3 * INIT_BLOCK + 7, 8, seed=5)
    cut = INIT_BLOCK + 300
    end = 3 * INIT_BLOCK + 7
    halves = torch.cat([initial_rows(0, cut, 8, seed=5), initial_rows(cut, end, 8, seed=5)])
    assert torch.equal(whole, halves)
    assert not torch.equal(whole, initial_rows(0, 3 * INIT_BLOCK + 7, 8, seed=6))


def test_assembling_shards_of_rows_and_columns_gives_the_whole_table_or_refuses_a_gap() -> None:
    shapes = {"item": (5, 8), "item_bias": (5, 4), "position": (6, 8), "gap": (40, 8)}
    item = torch.arange(40.0).view(5, 8)
    parts = [
        {"table.item.0.0": item[:, :4], "table.item_bias.0.0": torch.ones(5, 4),
         "table.position.0.0": torch.zeros(6, 8), "encoder.w": torch.ones(2)},
        {"table.item.0.4": item[:, 4:], "table.gap.0.0": torch.zeros(20, 8),
         "table.gap.20.0": torch.ones(20, 8)},
    ]
    tensors = assemble(parts, shapes)
    assert torch.equal(tensors["item_embedding.weight"], item)
    assert tensors["item_bias"].shape == (5,)
    assert tensors["gap_embedding.weight"][20:].eq(1).all()
    assert torch.equal(tensors["w"], torch.ones(2))
    del parts[1]["table.gap.20.0"]
    with pytest.raises(ValueError, match="table=gap"):
        assemble(parts, shapes)
