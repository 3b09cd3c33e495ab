"""Where each embedding table of the session Transformer lives: TorchRec's planner decides.

The planner may split a table by tables, rows or columns (table-wise, row-wise, column-wise;
replication and the multi-host kinds are left out) and places the shards so that each process's
storage stays within its budget, as its own estimate counts it: the shard's weights, the fused
optimiser's state, and the step's lookups (the batch's items and the whole catalog, which the
tied softmax reads every step). A budget that no placement meets is refused before any training.

Rank 0 plans and sends the plan, or the refusal, to every process, so all of them shard alike or
stop alike with no collective left pending.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torchrec.distributed.embedding import EmbeddingCollectionSharder
from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints
from torchrec.distributed.planner.storage_reservations import FixedPercentageStorageReservation
from torchrec.distributed.planner.types import (
    KernelConfig,
    PlannerError,
    TopologyFactory,
    TrainerConfig,
)
from torchrec.distributed.types import ShardingPlan, ShardingType

from models.sharded_session import SessionModule

SHARDING_KINDS = [
    ShardingType.TABLE_WISE.value, ShardingType.ROW_WISE.value, ShardingType.COLUMN_WISE.value,
]


class PlanError(ValueError):
    """The tables do not fit the per-process budget on this many processes; `needed_bytes`
    is what each process would hold without the budget (empty when even that fails)."""

    def __init__(self, message: str, needed_bytes: list[int]) -> None:
        super().__init__(message)
        self.needed_bytes = needed_bytes


@dataclass(frozen=True)
class SessionPlan:
    plan: ShardingPlan
    tables: dict[str, dict[str, Any]]
    storage_bytes_by_rank: list[int]


def plan_tables(
    module: SessionModule, world: int, device: torch.device, batch_size: int,
    budget_bytes: int | None = None,
) -> SessionPlan:
    """The plan for `module` (its tables' optimiser already registered) on `world` processes;
    collective: every process calls it, every process gets the same answer or PlanError."""
    answer: list[Any] = [None]
    if dist.get_rank() == 0:
        try:
            answer[0] = _plan(module, world, device.type, batch_size, budget_bytes)
        except PlannerError as error:
            answer[0] = (_reason(error), _needed(module, world, device.type, batch_size))
    dist.broadcast_object_list(answer, src=0)
    if isinstance(answer[0], tuple):
        reason, needed = answer[0]
        raise PlanError(
            f"embedding tables need {max(needed, default=0)} bytes on the fullest of {world} "
            f"process(es), over the per-process budget of {budget_bytes} bytes ({reason})",
            needed,
        )
    result: SessionPlan = answer[0]
    return result


def _needed(module: SessionModule, world: int, device_type: str, batch_size: int) -> list[int]:
    try:
        return _plan(module, world, device_type, batch_size, None).storage_bytes_by_rank
    except PlannerError:
        return []


def _plan(
    module: SessionModule, world: int, device_type: str, batch_size: int,
    budget_bytes: int | None,
) -> SessionPlan:
    # The budget caps the memory the tables live in: the GPU's on CUDA, the host's on CPU.
    cap = {"hbm_cap_bytes" if device_type == "cuda" else "ddr_cap_bytes": budget_bytes}
    topology = TopologyFactory.create_topology(
        TrainerConfig(world_size=world, **(cap if budget_bytes is not None else {})),
        kernel_config=KernelConfig(compute_device=device_type),
    )
    planner = EmbeddingShardingPlanner(
        topology=topology, batch_size=batch_size,
        constraints=_constraints(module, batch_size),
        # The budget is the tables' alone: the dense encoder is small and replicated.
        storage_reservation=FixedPercentageStorageReservation(0.0),
    )
    plan = planner.plan(module, [EmbeddingCollectionSharder()])
    tables: dict[str, dict[str, Any]] = {}
    storage = [0] * world
    for option in planner.get_selected_options():
        shards = []
        for shard in option.shards:
            assert shard.rank is not None and shard.storage is not None
            used = shard.storage.hbm if device_type == "cuda" else shard.storage.ddr
            storage[shard.rank] += used
            shards.append({"rank": shard.rank, "offsets": list(shard.offset),
                           "sizes": list(shard.size), "storage_bytes": used})
        tables[option.name] = {"kind": option.sharding_type, "compute_kernel":
                               option.compute_kernel, "shards": shards}
    return SessionPlan(plan, tables, storage)


def _constraints(module: SessionModule, batch_size: int) -> dict[str, ParameterConstraints]:
    """Allowed kinds, and how many ids each feature looks up per row of a batch: a position per
    event for the sequence features, the whole catalog once per batch for the softmax."""
    rows = module.n_items + 1
    length = float(module.max_len)
    catalog = rows / max(1, batch_size)
    pooling = {"item": [length, catalog], "position": [length], "gap": [length],
               "item_bias": [catalog]}
    return {
        name: ParameterConstraints(sharding_types=SHARDING_KINDS, pooling_factors=factors)
        for name, factors in pooling.items()
    }


def _reason(error: PlannerError) -> str:
    first = str(error).strip().splitlines()
    return first[0] if first else type(error).__name__
