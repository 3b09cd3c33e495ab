"""Top-k ranking metrics for leave-one-out evaluation (one held-out target per user).

With a single relevant item per query:

- ``hr@k`` (hit rate) = 1 if the target ranks within the top k, else 0;
- ``ndcg@k`` = 1 / log2(rank + 1) if rank <= k, else 0 (the ideal DCG is 1);
- ``recall@k`` = hit rate at k (one relevant item), reported under its usual name;
- ``mrr@k`` = 1 / rank if rank <= k, else 0.

Ranks are 1-based and pessimistic about ties: every other candidate scoring at least as high as
the target ranks above it, so a model cannot profit from constant scores. Excluded candidates
(already seen items, padding) are given ``-inf`` before ranking; an excluded target never hits.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]
NEVER = np.iinfo(np.int64).max


def target_ranks(scores: FloatArray, targets: IntArray) -> IntArray:
    """1-based pessimistic rank of each target column in its row of ``scores``.

    A target whose score is ``-inf`` (excluded) or NaN gets rank :data:`NEVER`.
    """
    rows = np.arange(len(targets))
    target_scores = scores[rows, targets]
    at_least = (scores >= target_scores[:, None]).sum(axis=1)  # includes the target itself
    ranks: IntArray = at_least.astype(np.int64)
    ranks[~np.isfinite(target_scores)] = NEVER
    return ranks


def metrics_from_ranks(ranks: IntArray) -> dict[str, float]:
    """HR@10, NDCG@10, Recall@20 and MRR@20 averaged over queries."""
    if len(ranks) == 0:
        raise ValueError("no queries to evaluate")
    r = ranks.astype(np.float64)
    in10 = ranks <= 10
    in20 = ranks <= 20
    ndcg = np.where(in10, 1.0 / np.log2(np.minimum(r, 10.0) + 1.0), 0.0)
    mrr = np.where(in20, 1.0 / np.minimum(r, 20.0), 0.0)
    return {
        "hr@10": float(in10.mean()),
        "ndcg@10": float(ndcg.mean()),
        "recall@20": float(in20.mean()),
        "mrr@20": float(mrr.mean()),
    }


def exclude(scores: FloatArray, histories: list[IntArray]) -> FloatArray:
    """Sets padding (column 0) and each row's history items to ``-inf`` in place."""
    scores[:, 0] = -np.inf
    for row, seen in enumerate(histories):
        scores[row, seen] = -np.inf
    return scores
