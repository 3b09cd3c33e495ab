from __future__ import annotations

import pytest
import torch

from models.embedding_plan import (
    BYTES_PER_VALUE,
    PlanError,
    TableSpec,
    bytes_per_rank,
    plan_tables,
)
from models.sharded_embeddings import INIT_BLOCK, initial_rows

TABLES = [
    TableSpec("items", 10_001, 64),
    TableSpec("item_bias", 10_001, 1),
    TableSpec("positions", 200, 64),
    TableSpec("gaps", 40, 64),
]
FOLLOW = {"item_bias": "items"}


def test_one_process_holds_every_table_whole() -> None:
    plans = plan_tables(TABLES, 1, followers=FOLLOW)
    assert all(p.kind == "table_wise" and p.shards[0].rank == 0 for p in plans.values())


def test_a_table_larger_than_an_even_share_is_split_by_rows_over_every_process() -> None:
    plans = plan_tables(TABLES, 2, followers=FOLLOW)
    items = plans["items"]
    assert items.kind == "row_wise"
    assert [(s.rank, s.lo, s.hi) for s in items.shards] == [(0, 0, 5000), (1, 5000, 10_001)]
    assert plans["item_bias"].shards == items.shards  # the softmax adds both per column


def test_small_tables_go_whole_to_the_least_loaded_process_and_loads_come_out_even() -> None:
    plans = plan_tables(TABLES, 2, followers=FOLLOW)
    assert plans["positions"].kind == plans["gaps"].kind == "table_wise"
    assert plans["positions"].shards[0].rank != plans["gaps"].shards[0].rank
    loads = bytes_per_rank(plans, 2)
    total = sum(t.rows * t.dim for t in TABLES) * BYTES_PER_VALUE
    assert sum(loads) == total
    assert max(loads) <= 0.51 * total


def test_a_budget_one_process_cannot_meet_is_refused_but_two_processes_meet_it() -> None:
    total = sum(t.rows * t.dim for t in TABLES) * BYTES_PER_VALUE
    budget = int(0.6 * total)
    with pytest.raises(PlanError, match="over the per-process budget"):
        plan_tables(TABLES, 1, budget, FOLLOW)
    assert max(bytes_per_rank(plan_tables(TABLES, 2, budget, FOLLOW), 2)) <= budget


def test_a_row_starts_with_the_same_values_however_the_table_is_split() -> None:
    whole = initial_rows(0, 3 * INIT_BLOCK + 7, 8, seed=5)
    cut = INIT_BLOCK + 300
    end = 3 * INIT_BLOCK + 7
    halves = torch.cat([initial_rows(0, cut, 8, seed=5), initial_rows(cut, end, 8, seed=5)])
    assert torch.equal(whole, halves)
    assert not torch.equal(whole, initial_rows(0, 3 * INIT_BLOCK + 7, 8, seed=6))
