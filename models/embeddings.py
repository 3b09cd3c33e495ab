"""Layout of growing embedding tables.

:func:`padded_width` pads a row to a multiple of 16 bytes (aligned vector loads); the session
Transformer's item table and the ranker's layers use it. :func:`grow_optimizer_state` extends a
dense optimizer's per-row state (Adam moments) after an ``nn.Embedding`` was grown in place, so
ids admitted live train exactly like rows a fresh optimizer would have seen;
:func:`reset_optimizer_rows` gives a recycled row the state of a fresh one.
"""

from __future__ import annotations

import torch

ROW_ALIGN_BYTES = 16


def padded_width(dim: int, itemsize: int = 4) -> int:
    """Smallest width >= dim whose rows are a multiple of 16 bytes."""
    per_row = max(1, ROW_ALIGN_BYTES // itemsize)
    return -(-dim // per_row) * per_row


def grow_optimizer_state(optimizer: torch.optim.Optimizer, param: torch.Tensor) -> None:
    """Zero-pads each per-element state tensor of ``param`` to the parameter's new length.

    Existing rows keep their moments; new rows start from zero, exactly like a fresh optimizer.
    """
    state = optimizer.state.get(param)
    if not state:
        return
    for key, value in list(state.items()):
        if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape != param.shape:
            pad = param.shape[0] - value.shape[0]
            state[key] = torch.cat([value, value.new_zeros((pad, *value.shape[1:]))])


def reset_optimizer_rows(
    optimizer: torch.optim.Optimizer, param: torch.Tensor, rows: torch.Tensor
) -> None:
    """Zeroes each per-element state tensor of ``param`` at ``rows`` (first dimension): a row
    handed to another id starts from the state a fresh row has."""
    state = optimizer.state.get(param)
    if not state:
        return
    for value in state.values():
        if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape == param.shape:
            value[rows.to(value.device)] = 0
