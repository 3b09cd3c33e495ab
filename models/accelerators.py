"""placeholder"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@contextlib.contextmanager
def autocast_context(device: torch.device) -> Iterator[None]:
    if device.type == "cuda":
        with torch.autocast("cuda", dtype=torch.bfloat16):
            yield
    else:
        yield
