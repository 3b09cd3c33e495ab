"""The small protocols the scorer depends on, and the immutable bundle a model version becomes.

The scorer never touches torch modules or faiss indexes directly: a version is loaded into a
`ModelBundle` (recommender + candidate index + optional ranker + item id maps), and the registry
swaps whole bundles. Anything satisfying these protocols can serve (tests use tiny fakes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from models.retrieval import CandidateIndex

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]

History = Sequence[tuple[int, float]]
"""(item index, event time) pairs, oldest first; never empty when handed to a model."""


class Recommender(Protocol):
    """Turns user/session contexts into query vectors for the candidate index."""

    def encode(self, histories: Sequence[History]) -> FloatArray:
        """One query row per history, in the candidate index's space."""
        ...

    def item_vectors(self, indices: IntArray) -> FloatArray:
        """Output vectors of the given item indices (what the ranker compares with)."""
        ...


class Ranker(Protocol):
    """Re-scores retrieved candidates; higher is better."""

    def score(self, queries: FloatArray, candidates: IntArray, dense: FloatArray) -> FloatArray:
        """`queries [n, d]`, `candidates [n, c]` (item indices), `dense [n, f]` -> `[n, c]`."""
        ...


@dataclass(frozen=True)
class ModelBundle:
    version: str
    published_at: float
    item_ids: Sequence[str]
    """Index -> raw item id; index 0 is padding."""
    item_index: Mapping[str, int]
    recommender: Recommender
    index: CandidateIndex
    ranker: Ranker | None = None
