"""Next-item cross-entropy over the item catalog, written for CPU memory bandwidth.

- :func:`catalog_cross_entropy`: the full softmax over every catalog item. The ``[positions,
  items]`` logit matrix is never held whole: positions are taken in chunks whose logits stay in
  cache, and the gradients (of the hidden states, the item table and the item bias) are
  accumulated while each chunk's softmax is at hand, so the backward pass only scales them.
  Items a position has already seen (its prefix, never its target) can be left out of its
  softmax, as serving filters them.
- :func:`seen_pairs`: the (position, item) pairs of those prefix items, from a left-aligned batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

CHUNK_POSITIONS = 128
"""Positions per chunk: 128 rows of a 20k-item catalog are 10 MB of fp32 logits."""


def seen_pairs(items: torch.Tensor, picked: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``[2, pairs]``: (index into the picked positions, item) for every item at or before each
    picked position of its row, except the position's own target.

    ``items`` ``[batch, length]`` (0 = padding), ``picked`` ``[batch, length]`` bool (the
    positions that are targets, in row-major order), ``targets`` ``[picked.sum()]``.
    """
    length = items.shape[1]
    steps = torch.arange(length, device=items.device)
    rows, at = picked.nonzero(as_tuple=True)
    before = steps[None, :] <= at[:, None]  # [positions, length]
    prefix = items[rows]  # [positions, length]
    keep = before & (prefix > 0) & (prefix != targets[:, None])
    position, slot = keep.nonzero(as_tuple=True)
    return torch.stack([position, prefix[position, slot]])


class _CatalogCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, hidden: torch.Tensor, table: torch.Tensor, bias: torch.Tensor,
        targets: torch.Tensor, excluded: torch.Tensor, chunk: int,
    ) -> torch.Tensor:
        n = len(targets)
        hidden32, table32, bias32 = hidden.float(), table.float(), bias.float()
        grad_hidden = torch.empty_like(hidden32)
        grad_table = torch.zeros_like(table32)
        grad_bias = torch.zeros_like(bias32)
        order = torch.argsort(excluded[0], stable=True)
        ex_rows, ex_cols = excluded[0][order], excluded[1][order]
        bounds = torch.searchsorted(
            ex_rows, torch.arange(0, n + chunk, chunk, device=ex_rows.device)
        ).tolist()
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        for index, lo in enumerate(range(0, n, chunk)):
            hi = min(n, lo + chunk)
            h = hidden32[lo:hi]
            logits = torch.addmm(bias32, h, table32.T)
            logits[:, 0] = -torch.inf
            a, b = bounds[index], bounds[index + 1]
            if b > a:
                logits[ex_rows[a:b] - lo, ex_cols[a:b]] = -torch.inf
            lse = torch.logsumexp(logits, dim=1, keepdim=True)
            rows = torch.arange(hi - lo, device=h.device)
            tgt = targets[lo:hi]
            total += (lse[:, 0] - logits[rows, tgt]).sum()
            probs = logits.sub_(lse).exp_()
            probs[rows, tgt] -= 1.0
            torch.mm(probs, table32, out=grad_hidden[lo:hi])
            grad_table.addmm_(probs.T, h)
            grad_bias += probs.sum(dim=0)
        scale = 1.0 / max(n, 1)
        ctx.save_for_backward(grad_hidden * scale, grad_table * scale, grad_bias * scale)
        ctx.dtypes = (hidden.dtype, table.dtype, bias.dtype)
        return total * scale

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:
        grad_hidden, grad_table, grad_bias = ctx.saved_tensors
        dh, dt, db = ctx.dtypes
        return (
            (grad_hidden * grad_out).to(dh), (grad_table * grad_out).to(dt),
            (grad_bias * grad_out).to(db), None, None, None,
        )


def catalog_cross_entropy(
    hidden: torch.Tensor, table: torch.Tensor, bias: torch.Tensor, targets: torch.Tensor,
    excluded: torch.Tensor | None = None, chunk: int = CHUNK_POSITIONS,
) -> torch.Tensor:
    """Mean cross-entropy of ``targets`` under ``softmax(hidden @ table.T + bias)``.

    ``hidden`` ``[n, dim]``; ``table`` ``[items + 1, dim]`` and ``bias`` ``[items + 1]`` (row 0
    is padding, never a candidate); ``excluded`` ``[2, pairs]`` (position, item) left out of
    that position's softmax. Equal to ``F.cross_entropy`` over the masked logits.
    """
    if excluded is None:
        excluded = torch.zeros((2, 0), dtype=torch.int64, device=hidden.device)
    out: torch.Tensor = _CatalogCrossEntropy.apply(hidden, table, bias, targets, excluded, chunk)
    return out


def uniform_negatives(
    n_items: int, count: int, generator: torch.Generator | None, device: torch.device
) -> torch.Tensor:
    """``count`` distinct items drawn uniformly from ``1..n_items`` (all of them if fewer)."""
    if count >= n_items:
        return torch.arange(1, n_items + 1, device=device)
    picks = torch.randperm(n_items, generator=generator)[:count] + 1
    return picks.to(device)


ItemRows = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
"""Item ids -> (their vectors ``[n, dim]``, their biases ``[n]``), differentiable."""


def table_rows(table: torch.Tensor, bias: torch.Tensor) -> ItemRows:
    """:data:`ItemRows` of a whole item table held on this process."""
    return lambda ids: (table[ids], bias[ids])


def dropped_rows(rows: ItemRows, p: float) -> ItemRows:
    """``rows`` with dropout ``p`` on the vectors (not the biases). Every row read gets its own
    mask, so a target and the same item among the negatives are dropped independently."""
    def read(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        vectors, biases = rows(ids)
        return torch.nn.functional.dropout(vectors, p), biases
    return read


def sampled_cross_entropy(
    hidden: torch.Tensor, targets: torch.Tensor, negatives: torch.Tensor, rows: ItemRows,
    n_items: int, excluded: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sampled softmax: each position's target against ``negatives`` shared by the batch, drawn
    uniformly without replacement from the ``n_items`` catalog items (:func:`uniform_negatives`).

    The logQ correction: a negative's inclusion probability is ``k / n``, so it stands for
    ``n / k`` catalog items and ``log(n / k)`` is added to its logit; the denominator is then an
    unbiased estimate of the full softmax's. A negative that is the position's target (an
    accidental hit) or one of the ``excluded`` (position, item) pairs is left out.
    """
    vectors, biases = rows(torch.cat([targets, negatives]))
    n = len(targets)
    pos = (hidden * vectors[:n]).sum(-1) + biases[:n]
    neg = torch.addmm(biases[n:], hidden, vectors[n:].T)
    neg = neg + math.log(n_items / len(negatives))
    hit = negatives[None, :] == targets[:, None]
    if excluded is not None and excluded.shape[1]:
        slot = torch.full((n_items + 1,), -1, dtype=torch.int64, device=hidden.device)
        slot[negatives] = torch.arange(len(negatives), device=hidden.device)
        taken = slot[excluded[1]]
        keep = taken >= 0
        hit[excluded[0][keep], taken[keep]] = True
    logits = torch.cat([pos[:, None], neg.masked_fill(hit, -torch.inf)], dim=1).float()
    return torch.logsumexp(logits, dim=1).sub(logits[:, 0]).mean()
