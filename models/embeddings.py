"""placeholder"""

from __future__ import annotations

ROW_ALIGN_BYTES = 16


def padded_width(dim: int, itemsize: int = 4) -> int:
    """Smallest width >= dim whose rows are a multiple of 16 bytes."""
    per_row = max(1, ROW_ALIGN_BYTES // itemsize)
    return -(-dim // per_row) * per_row


def grow_optimizer_state(optimizer: "torch.optim.Optimizer", param: "torch.Tensor") -> None:
    """Zero-pads every per-element state tensor of ``param`` to its new first dimension."""
    import torch
    state = optimizer.state.get(param)
    if not state:
        return
    for key, value in list(state.items()):
        if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape != param.shape:
            pad = param.shape[0] - value.shape[0]
            state[key] = torch.cat([value, value.new_zeros((pad, *value.shape[1:]))])
