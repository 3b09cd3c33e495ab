"""What a stored model version answers for a user's history, computed the offline way: the
reference the scorer's served lists are held to.

No Kafka, no Redis, no approximate index: the version's encoder (the PyTorch module, as offline
evaluation runs it) encodes the history it reads (models/query_history.py), and its full-catalog
scores `h . e_j + b_j` are ranked exactly, every item of the version a candidate except the
excluded ones; ties go to the lower row. A served answer in retrieval order of the same version
from the same events at the same time is these items in this order, its scores these within
float tolerance (the scorer's encoder runtime and its index's arithmetic round differently).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

import numpy as np
import torch

from models.query_history import query_history
from models.sequence_training import history_batch
from models.session_checkpoint import SessionCheckpoint


def reference_answer(
    version: SessionCheckpoint,
    events: Iterable[tuple[str, float]],
    k: int,
    length: int,
    excluded: Collection[str] = (),
) -> list[tuple[str, float]]:
    """The top `k` (item id, score) for a user whose events (item id, event time) are `events`,
    the version reading the newest `length` of them; empty when it knows none of its items."""
    model = version.model.eval()
    length = min(length, model.config.max_len)
    history = query_history(events, version.item_rows, length)
    if not history:
        return []
    items = np.array([row for row, _ in history], dtype=np.int64)
    times = np.array([ts for _, ts in history], dtype=np.int64)
    x, gaps = history_batch([items], [times], length)
    with torch.inference_mode():
        scores = model.logits(model.encode(x, gaps))[0].float().numpy().astype(np.float64)
    ids = {row: item for item, row in version.item_rows.items()}
    allowed = np.full(len(scores), False)
    allowed[[row for row in ids if ids[row] not in excluded]] = True
    rows = np.flatnonzero(allowed)
    best = rows[np.lexsort((rows, -scores[rows]))][:k]
    return [(ids[int(row)], float(scores[row])) for row in best]
