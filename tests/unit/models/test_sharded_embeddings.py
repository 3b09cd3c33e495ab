from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist
from torch.multiprocessing.spawn import spawn

from models.embedding_plan import TableSpec, plan_tables
from models.sharded_embeddings import ShardedTable, initial_rows, sharded_logits

ROWS, DIM, WORLD = 50, 8, 2
TABLES = [TableSpec("items", ROWS, DIM), TableSpec("bias", ROWS, 1), TableSpec("small", 5, DIM)]


def _inputs(rank: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each process's ids, hidden states and upstream gradients (any process can rebuild them)."""
    g = torch.Generator().manual_seed(rank)
    n = 7 + 3 * rank  # the processes send different numbers of rows
    ids = torch.randint(0, ROWS, (n,), generator=g)
    hidden = torch.randn(n, DIM, generator=g)
    return ids, hidden, torch.randn(n, DIM, generator=g), torch.randn(n, ROWS, generator=g)


def _check(rank: int, store_path: str) -> None:
    dist.init_process_group(
        "gloo", init_method=f"file://{store_path}", rank=rank, world_size=WORLD
    )
    plans = plan_tables(TABLES, WORLD, followers={"bias": "items"})
    assert plans["items"].kind == "row_wise"
    items = ShardedTable(plans["items"], rank, None, 1.0, seed=1, padding_row=True)
    bias = ShardedTable(plans["bias"], rank, None, 1.0, seed=2)
    full = initial_rows(0, ROWS, DIM, 1)
    full[0] = 0
    full_bias = initial_rows(0, ROWS, 1, 2)
    assert items.weight.shape[0] < ROWS  # this process holds only its rows

    ids, hidden, up_vectors, up_scores = _inputs(rank)
    vectors = items.lookup(ids)
    scores = sharded_logits(hidden, items, bias)
    assert torch.allclose(vectors, full[ids] * (ids != 0).unsqueeze(1), atol=1e-6)
    assert torch.allclose(scores, hidden @ full.T + full_bias.T, atol=1e-5)

    ((vectors * up_vectors).sum() + (scores * up_scores).sum()).backward()  # type: ignore[no-untyped-call]
    expected = torch.zeros(ROWS, DIM)
    expected_bias = torch.zeros(ROWS, 1)
    for other in range(WORLD):
        o_ids, o_hidden, o_up_vectors, o_up_scores = _inputs(other)
        keep = (o_ids != 0).unsqueeze(1).float()
        expected.index_add_(0, o_ids, o_up_vectors * keep)
        expected += o_up_scores.T @ o_hidden
        expected_bias += o_up_scores.sum(0).unsqueeze(1)
    assert items.weight.grad is not None and bias.weight.grad is not None
    assert torch.allclose(items.weight.grad, expected[items.lo : items.hi], atol=1e-4)
    assert torch.allclose(bias.weight.grad, expected_bias[bias.lo : bias.hi], atol=1e-4)
    dist.destroy_process_group()


def test_sharded_lookups_and_scores_match_the_whole_table_in_values_and_gradients(
    tmp_path: Path,
) -> None:
    spawn(_check, args=(str(tmp_path / "store"),), nprocs=WORLD, join=True)  # type: ignore[no-untyped-call]
