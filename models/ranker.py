"""DLRM-style ranker over retrieved candidates.

Inputs per (request, candidate) pair:

- ``dense``: ``[batch, n_dense]`` float features from the Redis feature store (counts, CTR
  target encodings, recency, hour sin/cos...); the width is configurable and the ranker makes
  no assumption about their meaning, only that they are finite (scale them upstream, or leave
  ``log1p_dense`` on for raw counts);
- ``sparse``: ``[batch, n_sparse, dim]`` embedding vectors gathered by the caller: the session
  Transformer's query vector and the candidate's item vector (all of one width).

Architecture (Naumov et al., 2019): a bottom MLP maps dense features to ``dim``; the pairwise
dot products of {bottom output, sparse vectors} (strict upper triangle) are concatenated with the
bottom output and fed to a top MLP that outputs one logit.

API: ``DLRMRanker(config)``; ``forward(dense, sparse) -> logits [batch]``;
``score_candidates(query, candidates, dense) -> scores [n_candidates]`` for one request.
"""

from __future__ import annotations

import itertools

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from models.embeddings import padded_width


class DLRMConfig(BaseModel):
    """Shape and optimisation settings of :class:`DLRMRanker`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_dense: int = Field(16, ge=0, description="Width of the dense feature vector.")
    n_sparse: int = Field(2, ge=1, description="Embedding vectors per example.")
    dim: int = Field(64, ge=1, description="Embedding width (padded to 16-byte rows).")
    bottom_mlp: tuple[int, ...] = Field((128,), description="Hidden widths of the dense MLP.")
    top_mlp: tuple[int, ...] = Field((256, 128), description="Hidden widths of the top MLP.")
    log1p_dense: bool = Field(True, description="Apply sign(x)*log1p(|x|) to dense inputs.")
    seed: int = Field(0, description="Initialisation seed.")


def _mlp(sizes: list[int], final_activation: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(a, b))
        if final_activation or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRMRanker(nn.Module):
    """Dense + sparse inputs -> MLPs with pairwise dot interactions -> one logit."""

    def __init__(self, config: DLRMConfig) -> None:
        super().__init__()
        torch.manual_seed(config.seed)
        self.config = config
        self.dim = padded_width(config.dim)
        self.bottom = _mlp([max(1, config.n_dense), *config.bottom_mlp, self.dim], True)
        n_vectors = config.n_sparse + 1
        n_pairs = n_vectors * (n_vectors - 1) // 2
        self.top = _mlp([self.dim + n_pairs, *config.top_mlp, 1], False)
        self.pair_rows: torch.Tensor
        self.pair_cols: torch.Tensor
        rows, cols = torch.triu_indices(n_vectors, n_vectors, offset=1)
        self.register_buffer("pair_rows", rows, persistent=False)
        self.register_buffer("pair_cols", cols, persistent=False)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        """Logits ``[batch]`` for ``dense [batch, n_dense]`` and ``sparse [batch, k, dim]``."""
        cfg = self.config
        if dense.shape[-1] != cfg.n_dense or sparse.shape[1:] != (cfg.n_sparse, self.dim):
            raise ValueError(
                f"want dense [*, {cfg.n_dense}] and sparse [*, {cfg.n_sparse}, {self.dim}], got "
                f"{tuple(dense.shape)} and {tuple(sparse.shape)}"
            )
        if cfg.log1p_dense:
            dense = torch.sign(dense) * torch.log1p(dense.abs())
        if cfg.n_dense == 0:
            dense = dense.new_zeros(dense.shape[0], 1)
        bottom = self.bottom(dense)
        vectors = torch.cat([bottom[:, None, :], sparse], dim=1)
        dots = vectors @ vectors.transpose(1, 2)
        pairs = dots[:, self.pair_rows, self.pair_cols]
        logits: torch.Tensor = self.top(torch.cat([bottom, pairs], dim=1)).squeeze(-1)
        return logits

    @torch.no_grad()
    def score_candidates(
        self, query: torch.Tensor, candidates: torch.Tensor, dense: torch.Tensor
    ) -> torch.Tensor:
        """Scores ``[n]`` of n candidates for one request.

        ``query [dim]`` and ``candidates [n, dim]`` form the first two sparse slots; any further
        slots must be supplied by calling :meth:`forward` directly.
        """
        if self.config.n_sparse != 2:
            raise ValueError("score_candidates needs n_sparse == 2 (query, candidate)")
        sparse = torch.stack([query.expand_as(candidates), candidates], dim=1)
        return torch.sigmoid(self.forward(dense, sparse))



def correction_dlrm(config: DLRMConfig) -> DLRMRanker:
    """A DLRM whose output layer starts at zero: added to a retriever's score, it starts from
    retrieval order and learns only a correction to it."""
    dlrm = DLRMRanker(config)
    last = dlrm.top[-1]
    if not isinstance(last, nn.Linear):
        raise TypeError("the DLRM's top MLP must end in a Linear layer")
    nn.init.zeros_(last.weight)
    nn.init.zeros_(last.bias)
    return dlrm
