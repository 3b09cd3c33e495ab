"""Session Transformer: a SASRec-style causal encoder over a user's item sequence.

Inputs per position: the item embedding (rows of a growable table, index 0 = padding), a learned
absolute position and a temporal feature: the log-bucketed gap since the previous event (lagged
features, DESIGN.md §3). Sequences are left-aligned (right-padded), so with a causal mask a real
position never attends to padding. Item embeddings are tied between input and output; scores are
``h . E_j + b_j`` over *all* items and training minimises a full-softmax cross-entropy at every
position (next-item prediction), which ML-sized catalogs afford; for large catalogs
``loss="sampled"`` draws ``n_negatives`` shared uniform negatives per batch with logQ correction.

Public API (used by the trainer and the scorer):

- :class:`SessionTransformer` (``nn.Module``): ``forward(items, gaps) -> hidden states``,
  ``encode(items, gaps) -> query vectors``, ``item_vectors()``, ``grow_items(n_items)``.
- :mod:`models.sequence_training` holds the training loop (``fit``/``partial_fit``) and scoring.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from models.embeddings import padded_width
from models.session_config import SessionTransformerConfig

N_GAP_BUCKETS = 40


def gap_buckets(gaps_s: torch.Tensor) -> torch.Tensor:
    """Maps gaps in seconds (-1 = first event / padding) to buckets ``0..N_GAP_BUCKETS-1``.

    Bucket 0 means "no previous event"; others grow logarithmically so a second, a minute, a
    day and a month are all distinguishable.
    """
    clipped = gaps_s.clamp(min=0).to(torch.float32)
    buckets = 1 + torch.floor(torch.log2(clipped + 1.0)).to(torch.int64)
    buckets = buckets.clamp(max=N_GAP_BUCKETS - 1)
    return torch.where(gaps_s < 0, torch.zeros_like(buckets), buckets)


class SessionTransformer(nn.Module):
    """Causal Transformer encoder producing one query vector per sequence position."""

    def __init__(self, n_items: int, config: SessionTransformerConfig) -> None:
        super().__init__()
        self.config = config
        dim = padded_width(config.dim)
        self.dim = dim
        self.item_embedding = nn.Embedding(n_items + 1, dim, padding_idx=0)
        self.item_bias = nn.Parameter(torch.zeros(n_items + 1))
        self.position_embedding = nn.Embedding(config.max_len, dim)
        self.gap_embedding = nn.Embedding(N_GAP_BUCKETS, dim)
        self.input_dropout = nn.Dropout(config.dropout)
        self.input_norm = nn.LayerNorm(dim)
        layer = nn.TransformerEncoderLayer(
            d_model=dim,
            nhead=config.heads,
            dim_feedforward=dim * config.ffn_multiplier,
            dropout=config.dropout,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(
            layer, num_layers=config.layers, enable_nested_tensor=False
        )
        self.output_norm = nn.LayerNorm(dim)
        self._init_weights()

    def _init_weights(self) -> None:
        std = 1.0 / math.sqrt(self.dim)
        for emb in (self.item_embedding, self.position_embedding, self.gap_embedding):
            nn.init.normal_(emb.weight, std=std)
        with torch.no_grad():
            self.item_embedding.weight[0].zero_()

    @property
    def n_items(self) -> int:
        return int(self.item_embedding.num_embeddings) - 1

    def forward(self, items: torch.Tensor, gaps_s: torch.Tensor) -> torch.Tensor:
        """Hidden states ``[batch, length, dim]`` for left-aligned ``items`` (0 = padding)."""
        length = items.shape[1]
        positions = torch.arange(length, device=items.device)
        x = self.item_embedding(items) * math.sqrt(self.dim)
        x = x + self.position_embedding(positions)[None] + self.gap_embedding(gap_buckets(gaps_s))
        x = self.input_dropout(self.input_norm(x))
        causal = nn.Transformer.generate_square_subsequent_mask(length, device=items.device)
        h = self.encoder(x, mask=causal, is_causal=True)
        out: torch.Tensor = self.output_norm(h)
        return out

    def encode(self, items: torch.Tensor, gaps_s: torch.Tensor) -> torch.Tensor:
        """Query vector ``[batch, dim]``: the hidden state at each row's last real item."""
        hidden = self.forward(items, gaps_s)
        last = (items > 0).sum(dim=1).clamp(min=1) - 1
        return hidden[torch.arange(items.shape[0], device=items.device), last]

    def item_vectors(self) -> torch.Tensor:
        """``[n_items + 1, dim]`` output vectors; the ANN index stores rows 1..n_items."""
        return self.item_embedding.weight

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Full-catalog scores ``hidden . E^T + b`` (column 0 is padding)."""
        return hidden @ self.item_embedding.weight.T + self.item_bias

    def grow_items(self, n_items: int) -> None:
        """Extends the item table to ``n_items`` real items, keeping every existing row.

        New rows get the same initialisation as fresh ones. Optimizer state must be grown by the
        caller (see :func:`models.embeddings.grow_optimizer_state`).
        """
        old = self.item_embedding
        if n_items + 1 <= old.num_embeddings:
            return
        extra = n_items + 1 - old.num_embeddings
        fresh = torch.randn(extra, self.dim, device=old.weight.device) / math.sqrt(self.dim)
        weight = torch.cat([old.weight.detach(), fresh.to(old.weight.dtype)])
        bias = torch.cat([self.item_bias.detach(), self.item_bias.new_zeros(extra)])
        # Same Parameter objects, new storage: optimizer references stay valid.
        old.weight.data = weight
        old.num_embeddings = n_items + 1
        self.item_bias.data = bias
