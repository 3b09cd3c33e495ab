"""Session Transformer: a SASRec-style causal encoder over a user's item sequence.

Inputs per position: the item embedding (rows of a growable table, index 0 = padding), a learned
absolute position and a temporal feature: the log-bucketed gap since the previous event (lagged
features). Sequences are left-aligned (right-padded), so with a causal mask a real
position never attends to padding. Item embeddings are tied between input and output; scores are
``h . E_j + b_j`` over *all* items. Training (:mod:`models.sequence_training`) minimises a
next-item cross-entropy at every position (:mod:`models.softmax_loss`).

Public API (used by the trainer and the scorer):

- :class:`SessionTransformer` (``nn.Module``): ``forward(items, gaps) -> hidden states``,
  ``encode(items, gaps) -> query vectors``, ``item_vectors()``, ``grow_items(n_items)``.
- :mod:`models.sequence_training` holds the training loop (``fit``/``partial_fit``) and scoring.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F  # noqa: N812 - torch convention
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


class Dropout(nn.Module):
    """Inverted dropout whose mask comes from uniform draws: the same distribution as
    ``nn.Dropout``, which draws a Bernoulli per element at about five times the CPU cost."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        # One float mask holding 0 or 1/(1-p), built in place: a single multiply forward
        # and backward.
        scale = torch.rand_like(x).ge_(self.p).mul_(1.0 / (1.0 - self.p))
        return x * scale


class CausalBlock(nn.Module):
    """Pre-norm Transformer block with causal ``scaled_dot_product_attention``.

    Written out rather than ``nn.TransformerEncoderLayer`` so attention always takes the fused
    causal kernel: attention-probability dropout would force the slow math path (and cost a
    quarter of the step on CPU), so dropout is applied on the residual branches only.
    """

    def __init__(self, dim: int, heads: int, ffn_multiplier: int, dropout: float) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim={dim} must be divisible by heads={heads}")
        self.heads = heads
        self.attn_norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ffn_norm = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(
            nn.Linear(dim, dim * ffn_multiplier),
            nn.GELU(),
            Dropout(dropout),
            nn.Linear(dim * ffn_multiplier, dim),
        )
        self.dropout = Dropout(dropout)

    def _attend(self, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """The attention output's residual branch, then the feed-forward's."""
        y = x + self.dropout(self.proj(attended))
        out: torch.Tensor = y + self.dropout(self.ffn(self.ffn_norm(y)))
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, dim = x.shape
        qkv = self.qkv(self.attn_norm(x)).view(batch, length, 3, self.heads, dim // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self._attend(x, attended.transpose(1, 2).reshape(batch, length, dim))

    def query(self, x: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
        """``forward(x)[row, last[row]]`` for each row, computing only those positions' outputs.

        Every position still supplies keys and values, but the query projection's output, the
        attention, the output projection and the feed-forward (the block's widest layer) run
        for one position per row: a quarter to a third less encoder time per request on CPU.
        Attention is written out: one query row per sequence makes it two small matmuls, and a
        masked fused kernel took a slower path on many-threaded hosts.
        """
        batch, length, dim = x.shape
        rows = torch.arange(batch, device=x.device)
        qkv = self.qkv(self.attn_norm(x)).view(batch, length, 3, self.heads, dim // self.heads)
        q = qkv[rows, last, 0].unsqueeze(2)  # [batch, heads, 1, head_dim]
        k = qkv[:, :, 1].transpose(1, 2)
        v = qkv[:, :, 2].transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(dim // self.heads))
        # Causal for the query at `last`: later positions (padding, left-aligned rows) are hidden.
        hidden = torch.arange(length, device=x.device)[None, :] > last[:, None]
        scores = scores.masked_fill(hidden[:, None, None, :], float("-inf"))
        attended = (torch.softmax(scores, dim=-1) @ v).reshape(batch, dim)
        return self._attend(x[rows, last], attended)


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
        self.input_dropout = Dropout(config.dropout)
        self.input_norm = nn.LayerNorm(dim)
        self.blocks = nn.ModuleList(
            CausalBlock(dim, config.heads, config.ffn_multiplier, config.dropout)
            for _ in range(config.layers)
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

    def _inputs(self, items: torch.Tensor, gaps_s: torch.Tensor) -> torch.Tensor:
        length = items.shape[1]
        positions = torch.arange(length, device=items.device)
        x = self.item_embedding(items) * math.sqrt(self.dim)
        x = x + self.position_embedding(positions)[None] + self.gap_embedding(gap_buckets(gaps_s))
        out: torch.Tensor = self.input_dropout(self.input_norm(x))
        return out

    def forward(self, items: torch.Tensor, gaps_s: torch.Tensor) -> torch.Tensor:
        """Hidden states ``[batch, length, dim]`` for left-aligned ``items`` (0 = padding)."""
        x = self._inputs(items, gaps_s)
        for block in self.blocks:
            x = block(x)
        out: torch.Tensor = self.output_norm(x)
        return out

    def encode(self, items: torch.Tensor, gaps_s: torch.Tensor) -> torch.Tensor:
        """Query vector ``[batch, dim]``: the hidden state at each row's last real item (what
        ``forward`` gives there; the last block computes only that position)."""
        last = (items != 0).sum(dim=1).clamp(min=1) - 1
        x = self._inputs(items, gaps_s)
        for block in self.blocks[:-1]:
            x = block(x)
        top: CausalBlock = self.blocks[-1]  # type: ignore[assignment]
        out: torch.Tensor = self.output_norm(top.query(x, last))
        return out

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


    @torch.no_grad()
    def reset_items(self, rows: torch.Tensor) -> None:
        """Fresh weights for ``rows`` (an id's row handed to another id): the initialisation a
        new row gets, bias zero."""
        weight = self.item_embedding.weight
        fresh = torch.randn(len(rows), self.dim, device=weight.device) / math.sqrt(self.dim)
        weight[rows.to(weight.device)] = fresh.to(weight.dtype)
        self.item_bias[rows.to(weight.device)] = 0


class QueryEncoder(nn.Module):
    """`SessionTransformer.encode` as a module's forward: what tracing, ONNX export and CUDA
    graph capture record."""

    def __init__(self, model: SessionTransformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, items: torch.Tensor, gaps_s: torch.Tensor) -> torch.Tensor:
        return self.model.encode(items, gaps_s)
