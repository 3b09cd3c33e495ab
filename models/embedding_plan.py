"""Where each embedding table lives when training runs on several processes.

A table small enough to share a process with others is placed whole (table-wise) on the least
loaded process; a table larger than an even share of all tables is split by contiguous row
ranges over every process (row-wise), which is what lets a table larger than one process's
budget be trained at all. A follower table (the item bias) takes exactly its leader's row
ranges: the softmax adds ``E_j . h + b_j`` per item column, so both must sit on the same
process. The budget counts a float32 weight, its gradient and AdamW's two moments per value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

BYTES_PER_VALUE = 4 * 4  # weight, gradient, AdamW exp_avg and exp_avg_sq, float32 each


class PlanError(ValueError):
    """The tables do not fit the per-process embedding budget on this many processes."""


@dataclass(frozen=True)
class TableSpec:
    name: str
    rows: int
    dim: int

    @property
    def train_bytes(self) -> int:
        return self.rows * self.dim * BYTES_PER_VALUE


@dataclass(frozen=True)
class Shard:
    """Rows ``[lo, hi)`` of a table, held by ``rank``."""

    rank: int
    lo: int
    hi: int


@dataclass(frozen=True)
class TablePlan:
    table: TableSpec
    kind: Literal["table_wise", "row_wise"]
    shards: tuple[Shard, ...]

    def shard_of(self, rank: int) -> Shard | None:
        return next((s for s in self.shards if s.rank == rank), None)

    def describe(self) -> dict[str, object]:
        return {
            "rows": self.table.rows,
            "dim": self.table.dim,
            "kind": self.kind,
            "shards": [{"rank": s.rank, "rows": [s.lo, s.hi]} for s in self.shards],
        }


def plan_tables(
    tables: Sequence[TableSpec],
    world: int,
    budget_bytes: int | None = None,
    followers: Mapping[str, str] | None = None,
) -> dict[str, TablePlan]:
    """Plans every table; raises PlanError when a process would exceed ``budget_bytes``."""
    followers = dict(followers or {})
    leaders = sorted(
        (t for t in tables if t.name not in followers), key=lambda t: (-t.train_bytes, t.name)
    )
    fair = sum(t.train_bytes for t in tables) / world
    load = [0] * world
    plans: dict[str, TablePlan] = {}
    for table in leaders:
        if world > 1 and table.train_bytes > fair:
            plans[table.name] = TablePlan(table, "row_wise", _row_ranges(table.rows, world))
        else:
            rank = min(range(world), key=lambda r: (load[r], r))
            plans[table.name] = TablePlan(table, "table_wise", (Shard(rank, 0, table.rows),))
        _add_load(load, plans[table.name])
    by_name = {t.name: t for t in tables}
    for name, leader in followers.items():
        table, lead = by_name[name], plans[leader]
        if table.rows != lead.table.rows:
            raise PlanError(f"table={name} rows={table.rows} cannot follow {leader}")
        plans[name] = TablePlan(table, lead.kind, lead.shards)
        _add_load(load, plans[name])
    if budget_bytes is not None and max(load) > budget_bytes:
        worst = max(range(world), key=lambda r: load[r])
        raise PlanError(
            f"embedding tables need {load[worst]} bytes on rank {worst} of {world}, "
            f"over the per-process budget of {budget_bytes} bytes"
        )
    return {t.name: plans[t.name] for t in tables}


def bytes_per_rank(plans: Mapping[str, TablePlan], world: int) -> list[int]:
    load = [0] * world
    for plan in plans.values():
        _add_load(load, plan)
    return load


def _row_ranges(rows: int, world: int) -> tuple[Shard, ...]:
    return tuple(Shard(r, r * rows // world, (r + 1) * rows // world) for r in range(world))


def _add_load(load: list[int], plan: TablePlan) -> None:
    for shard in plan.shards:
        load[shard.rank] += (shard.hi - shard.lo) * plan.table.dim * BYTES_PER_VALUE
