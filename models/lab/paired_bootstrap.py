"""Paired bootstrap interval of the mean difference of two models' per-query metrics.

Both models are scored on the same queries, so the queries are resampled together and the
interval is of ``mean(a - b)`` over each resample: the query-to-query variance both models
share cancels, which is what lets a gain of a few percent be told from noise.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Float64Array = npt.NDArray[np.float64]


def paired_bootstrap_ci(
    a: Float64Array, b: Float64Array, n_resamples: int = 2000, level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of ``mean(a - b)`` over ``n_resamples`` query resamples."""
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise ValueError("need two equally long, non-empty per-query metric vectors")
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples, dtype=np.float64)
    chunk = max(1, 2_000_000 // len(diff))  # bounds the index matrix's memory
    for lo in range(0, n_resamples, chunk):
        n = min(chunk, n_resamples - lo)
        means[lo : lo + n] = diff[rng.integers(0, len(diff), size=(n, len(diff)))].mean(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(low), float(high)
