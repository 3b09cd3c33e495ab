"""DLRM ranker: configurable dense width, pairwise interactions that learn."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - torch convention

from models.ranker import DLRMConfig, DLRMRanker


def test_rejects_inputs_of_the_wrong_width() -> None:
    ranker = DLRMRanker(DLRMConfig(n_dense=5, n_sparse=2, dim=8))
    with pytest.raises(ValueError):
        ranker(torch.zeros(3, 4), torch.zeros(3, 2, 8))
    assert ranker(torch.zeros(3, 5), torch.zeros(3, 2, 8)).shape == (3,)


def test_learns_a_query_candidate_interaction_and_a_dense_signal() -> None:
    torch.manual_seed(0)
    config = DLRMConfig(n_dense=3, n_sparse=2, dim=8, bottom_mlp=(16,), top_mlp=(32,))
    ranker = DLRMRanker(config)
    optimizer = torch.optim.Adam(ranker.parameters(), lr=1e-2)

    def sample(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        query, item = torch.randn(n, 8), torch.randn(n, 8)
        dense = torch.randn(n, 3) * 5
        labels = ((query * item).sum(1) + dense[:, 0] > 0).float()
        return dense, torch.stack([query, item], dim=1), labels

    for _ in range(150):
        dense, sparse, labels = sample(128)
        optimizer.zero_grad()
        loss = F.binary_cross_entropy_with_logits(ranker(dense, sparse), labels)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
    dense, sparse, labels = sample(2_000)
    accuracy = ((ranker(dense, sparse) > 0).float() == labels).float().mean()
    assert accuracy > 0.85


def test_score_candidates_ranks_one_request() -> None:
    ranker = DLRMRanker(DLRMConfig(n_dense=2, n_sparse=2, dim=8)).eval()
    scores = ranker.score_candidates(torch.randn(8), torch.randn(30, 8), torch.randn(30, 2))
    assert scores.shape == (30,)
    assert ((scores > 0) & (scores < 1)).all()
