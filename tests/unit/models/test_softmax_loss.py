"""Catalog cross-entropy: equal to the textbook loss and gradients, however it is chunked."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - torch convention

from models.softmax_loss import (
    catalog_cross_entropy,
    dropped_rows,
    sampled_cross_entropy,
    seen_pairs,
    table_rows,
    uniform_negatives,
)


def _problem(n: int = 37, items: int = 50, dim: int = 8) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    hidden = torch.randn(n, dim, requires_grad=True)
    table = torch.randn(items + 1, dim, requires_grad=True)
    bias = torch.randn(items + 1, requires_grad=True)
    targets = torch.randint(1, items + 1, (n,))
    return hidden, table, bias, targets


def _grads(loss: torch.Tensor, *params: torch.Tensor) -> list[torch.Tensor]:
    return list(torch.autograd.grad(loss, params))


@pytest.mark.parametrize("chunk", [1, 5, 64])
def test_chunked_loss_and_gradients_equal_the_plain_masked_cross_entropy(chunk: int) -> None:
    hidden, table, bias, targets = _problem()
    excluded = torch.tensor([[0, 0, 3, 36], [4, 9, 1, 50]])
    excluded = excluded[:, excluded[1] != targets[excluded[0]]]
    logits = hidden @ table.T + bias
    logits = logits.index_put((torch.arange(len(targets)), torch.zeros_like(targets)),
                              torch.tensor(-math.inf))
    logits = logits.index_put((excluded[0], excluded[1]), torch.tensor(-math.inf))
    plain = F.cross_entropy(logits, targets)
    fused = catalog_cross_entropy(hidden, table, bias, targets, excluded, chunk)
    assert float(fused.detach()) == pytest.approx(float(plain.detach()), rel=1e-5)
    for mine, theirs in zip(_grads(fused, hidden, table, bias), _grads(plain, hidden, table, bias),
                            strict=True):
        assert torch.allclose(mine, theirs, atol=1e-5)


def test_seen_pairs_are_each_positions_prefix_but_never_its_target() -> None:
    items = torch.tensor([[3, 5, 3, 7], [2, 4, 0, 0]])
    picked = torch.tensor([[True, True, True, False], [True, False, False, False]])
    targets = torch.tensor([5, 3, 9, 4])  # next items; row 0 step 1's target 3 was seen before
    pairs = seen_pairs(items, picked, targets)
    got = sorted(zip(pairs[0].tolist(), pairs[1].tolist(), strict=True))
    assert got == [(0, 3), (1, 5), (2, 3), (2, 3), (2, 5), (3, 2)]


def test_sampled_loss_over_the_whole_catalog_is_the_full_softmax() -> None:
    hidden, table, bias, targets = _problem(items=20)
    negatives = uniform_negatives(20, 64, torch.Generator().manual_seed(0), hidden.device)
    assert negatives.tolist() == list(range(1, 21))
    sampled = sampled_cross_entropy(hidden, targets, negatives, table_rows(table, bias), 20)
    full = catalog_cross_entropy(hidden, table, bias, targets)
    assert float(sampled.detach()) == pytest.approx(float(full.detach()), rel=1e-5)


def test_each_sampled_negative_stands_for_its_share_of_the_catalog() -> None:
    # One position, the target scoring 0 and every other item scoring 0: the full softmax's
    # loss is log(n). With k of the n - 1 others sampled, each must count n / k times.
    items, k = 1000, 10
    hidden = torch.zeros(1, 4)
    table, bias = torch.zeros(items + 1, 4), torch.zeros(items + 1)
    targets = torch.tensor([1])
    negatives = torch.arange(2, 2 + k)
    loss = sampled_cross_entropy(hidden, targets, negatives, table_rows(table, bias), items)
    assert float(loss) == pytest.approx(math.log(1 + k * items / k), rel=1e-6)


def test_sampled_negatives_that_are_the_target_or_already_seen_are_left_out() -> None:
    hidden, table, bias, targets = _problem(n=2, items=30)
    targets = torch.tensor([3, 4])
    negatives = torch.tensor([3, 4, 7, 8])
    excluded = torch.tensor([[0], [7]])  # position 0 has seen item 7
    loss = sampled_cross_entropy(hidden, targets, negatives, table_rows(table, bias), 30,
                                 excluded)
    scale = math.log(30 / 4)
    logits = hidden @ table.T + bias
    rows = []
    for row, keep in ((0, [8, 4]), (1, [3, 7, 8])):
        neg = logits[row, keep] + scale
        rows.append(torch.logsumexp(torch.cat([logits[row, targets[row]][None], neg]), 0)
                    - logits[row, targets[row]])
    assert float(loss.detach()) == pytest.approx(float(torch.stack(rows).mean().detach()), rel=1e-5)


def test_dropped_rows_zero_a_share_of_each_vector_independently_and_keep_the_biases() -> None:
    torch.manual_seed(0)
    table, bias = torch.randn(11, 512), torch.randn(11)
    ids = torch.tensor([3, 3, 7])  # item 3 as a target and again as a negative
    vectors, biases = dropped_rows(table_rows(table, bias), 0.25)(ids)
    kept = vectors != 0
    assert 0.7 < float(kept.float().mean()) < 0.8
    assert torch.allclose(vectors[kept], (table[ids] / 0.75)[kept])
    assert not torch.equal(kept[0], kept[1])
    assert torch.equal(biases, bias[ids])
