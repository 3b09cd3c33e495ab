"""Model-parallel embedding tables: each process holds only its shards (see models.embedding_plan).

A lookup sends every id to the process that holds its row and gets the vector back, both with
``torch.distributed.all_to_all_single``; the backward pass sends the vectors' gradients back to
the holders the same way (the autograd function below calls the library collective in both
directions). The tied output softmax runs where the item rows are: each holder scores every
process's hidden states against its rows and returns the score columns. Every process must make
the same calls in the same order (they are collectives), with any number of rows, zero included.
The exchanges use their own process group so they never interleave with DDP's gradient
all-reduce on the default group.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F  # noqa: N812 - torch convention
from torch import nn

from models.embedding_plan import TablePlan

INIT_BLOCK = 1024


class _Exchange(torch.autograd.Function):
    """``all_to_all_single`` along dim 0 whose backward is the reverse exchange."""

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, send: list[int], receive: list[int], group: Any
    ) -> torch.Tensor:
        ctx.send, ctx.receive, ctx.group = send, receive, group
        return exchange(x, send, receive, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        return exchange(grad, ctx.receive, ctx.send, ctx.group), None, None, None


def exchange(x: torch.Tensor, send: list[int], receive: list[int], group: Any) -> torch.Tensor:
    """Rows ``send[r]`` of x (in rank order) go to rank r; ``receive[r]`` rows come from r."""
    out = x.new_empty((sum(receive), *x.shape[1:]))
    dist.all_to_all_single(out, x.contiguous(), receive, send, group=group)
    return out


def differentiable_exchange(
    x: torch.Tensor, send: list[int], receive: list[int], group: Any
) -> torch.Tensor:
    out: torch.Tensor = _Exchange.apply(x, send, receive, group)
    return out


def swap_counts(send: torch.Tensor, group: Any) -> list[int]:
    """Tells every rank how many rows this one sends it; returns how many each sends here."""
    receive = torch.empty_like(send)
    dist.all_to_all_single(receive, send, group=group)
    return [int(c) for c in receive.tolist()]


class ShardedTable(nn.Module):
    """This process's rows of one planned table (possibly none) and the distributed lookup."""

    def __init__(
        self, plan: TablePlan, rank: int, group: Any, std: float, seed: int,
        padding_row: bool = False, device: torch.device | None = None,
    ) -> None:
        super().__init__()
        self.plan, self.rank, self.group = plan, rank, group
        self.world = dist.get_world_size(group)
        shard = plan.shard_of(rank)
        self.lo, self.hi = (shard.lo, shard.hi) if shard else (0, 0)
        rows = initial_rows(self.lo, self.hi, plan.table.dim, seed) * std
        if padding_row and self.lo == 0 and self.hi > 0:
            rows[0] = 0
        self.padding_row = padding_row
        self.weight = nn.Parameter(rows.to(device or torch.device("cpu")))
        self.starts = torch.tensor([s.lo for s in plan.shards[1:]], dtype=torch.int64)
        self.holders = torch.tensor([s.rank for s in plan.shards], dtype=torch.int64)

    def lookup(self, ids: torch.Tensor) -> torch.Tensor:
        """Vectors ``[*ids.shape, dim]``; row 0 of a padding table is always zeros."""
        flat = ids.reshape(-1)
        shape = (*ids.shape, self.plan.table.dim)
        if self.world == 1:  # every row is here: no exchange to make
            return self._masked(F.embedding(flat, self.weight), flat).view(shape)
        owner = self.holders.to(flat.device)[
            torch.bucketize(flat, self.starts.to(flat.device), right=True)
        ]
        order = torch.argsort(owner, stable=True)
        send = torch.bincount(owner, minlength=self.world)
        receive = swap_counts(send, self.group)
        send_list = [int(c) for c in send.tolist()]
        asked = exchange(flat[order], send_list, receive, self.group)
        found = F.embedding(asked - self.lo, self.weight)
        vectors = differentiable_exchange(found, receive, send_list, self.group)
        out = torch.empty_like(vectors).index_copy(0, order, vectors)
        return self._masked(out, flat).view(shape)

    def _masked(self, vectors: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        if not self.padding_row:
            return vectors
        return vectors * (ids != 0).unsqueeze(1).to(vectors.dtype)


def sharded_logits(hidden: torch.Tensor, items: ShardedTable, bias: ShardedTable) -> torch.Tensor:
    """``hidden @ E.T + b`` over every row of the item table, ``[len(hidden), rows]``.

    Hidden states go to every process holding item rows; each scores them against its rows
    (and its rows' biases, co-located by the plan) and sends the score columns back."""
    world, shards = items.world, items.plan.shards
    if world == 1:
        return hidden @ items.weight.to(hidden.dtype).T + bias.weight.to(hidden.dtype).T
    holders = {s.rank for s in shards}
    send = torch.tensor(
        [len(hidden) if r in holders else 0 for r in range(world)], device=hidden.device
    )
    receive = swap_counts(send, items.group)
    send_list = [int(c) for c in send.tolist()]
    copies = hidden.repeat(len(holders), 1)
    gathered = differentiable_exchange(copies, send_list, receive, items.group)
    local = items.weight.to(gathered.dtype)
    scores = gathered @ local.T + bias.weight.to(gathered.dtype).T
    width = items.hi - items.lo
    back = differentiable_exchange(
        scores.reshape(-1), [c * width for c in receive],
        [len(hidden) * _width(items.plan, r) for r in range(world)], items.group,
    )
    blocks, start = [], 0
    for shard in shards:
        size = len(hidden) * (shard.hi - shard.lo)
        blocks.append(back[start : start + size].view(len(hidden), shard.hi - shard.lo))
        start += size
    return torch.cat(blocks, dim=1)


def _width(plan: TablePlan, rank: int) -> int:
    shard = plan.shard_of(rank)
    return 0 if shard is None else shard.hi - shard.lo


def initial_rows(lo: int, hi: int, dim: int, seed: int) -> torch.Tensor:
    """Standard normal rows ``[lo, hi)`` drawn in fixed blocks of INIT_BLOCK rows, each from its
    own seed: a row starts the same however the table is split, so runs on 1 and N processes
    differ only in how batches are split, and no process draws rows it does not hold."""
    blocks = []
    for block in range(lo // INIT_BLOCK, -(-hi // INIT_BLOCK)):
        generator = torch.Generator().manual_seed(seed * 1_000_003 + block)
        drawn = torch.randn(INIT_BLOCK, dim, generator=generator)
        start = block * INIT_BLOCK
        blocks.append(drawn[max(lo, start) - start : min(hi, start + INIT_BLOCK) - start])
    return torch.cat(blocks) if blocks else torch.zeros(0, dim)


def embedding_std(dim: int) -> float:
    return 1.0 / math.sqrt(dim)
