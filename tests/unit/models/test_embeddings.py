"""Embedding table layout: padded widths, and growth that keeps rows and optimizer state."""

from __future__ import annotations

import math

import torch

from models.embeddings import padded_width
from models.sequence_training import SessionTrainer
from models.session_config import SessionTransformerConfig


def test_widths_are_padded_to_16_byte_multiples() -> None:
    assert padded_width(1) == 4
    assert padded_width(64) == 64
    assert padded_width(30) == 32
    assert padded_width(30, itemsize=2) == 32


def test_transformer_item_growth_keeps_rows_and_adam_moments() -> None:
    config = SessionTransformerConfig(dim=16, heads=2, layers=1, max_len=8, dropout=0.0)
    trainer = SessionTrainer(n_items=5, config=config, device=torch.device("cpu"))
    seqs = [torch.tensor([1, 2, 3, 4, 5]).numpy()]
    times = [torch.arange(5).numpy()]
    trainer.partial_fit(seqs, times)
    weight = trainer.model.item_embedding.weight
    rows_before = weight.detach().clone()
    moments_before = trainer.optimizer.state[weight]["exp_avg"].clone()

    trainer.grow_items(9)

    weight = trainer.model.item_embedding.weight
    assert weight.shape[0] == 10
    assert torch.equal(weight[:6].detach(), rows_before)
    state = trainer.optimizer.state[weight]
    assert torch.equal(state["exp_avg"][:6], moments_before)
    assert torch.count_nonzero(state["exp_avg"][6:]) == 0
    loss = trainer.partial_fit([torch.tensor([6, 7, 8, 9]).numpy()], [torch.arange(4).numpy()])
    assert math.isfinite(loss)  # the grown parameter trains with its grown state
