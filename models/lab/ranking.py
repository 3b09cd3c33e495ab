"""Re-ranking a retriever's candidates: the examples a ranker learns from and the interface.

A query's examples are its k retrieved candidates (a fixed-width block, so a listwise loss is one
softmax per row): their point-in-time features (:mod:`models.point_in_time`), the retriever's
score, whether the slot holds a real candidate (a catalog smaller than k leaves empty slots) and
a label that is 1 at the query's target when the retriever found it.

Any object with ``name``, ``fit(examples)`` and ``score(examples)`` is a :class:`Ranker`; it
returns one score per slot and higher ranks first. :func:`reranked_ranks` turns those scores into
the target's rank over the catalog (a target outside the candidates never hits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from models.metrics import NEVER

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class RankingExamples:
    """Per query ``q`` and candidate slot ``j``: features ``[q, k, f]`` and the rest ``[q, k]``.

    ``query_vectors [q, d]``, ``item_vectors [n_items + 1, d]`` and ``last_items [q]`` (0 for an
    empty history) are the retriever's, for rankers that read embeddings.
    """

    features: FloatArray
    retriever_scores: FloatArray
    candidates: IntArray
    valid: BoolArray
    labels: FloatArray
    query_vectors: FloatArray
    item_vectors: FloatArray
    last_items: IntArray

    def __len__(self) -> int:
        return int(self.features.shape[0])

    def subset(self, rows: IntArray) -> RankingExamples:
        """The examples of the queries ``rows`` (the item table is shared)."""
        return RankingExamples(
            features=self.features[rows],
            retriever_scores=self.retriever_scores[rows],
            candidates=self.candidates[rows],
            valid=self.valid[rows],
            labels=self.labels[rows],
            query_vectors=self.query_vectors[rows],
            item_vectors=self.item_vectors,
            last_items=self.last_items[rows],
        )

    @classmethod
    def concat(cls, parts: list[RankingExamples]) -> RankingExamples:
        """The queries of every part, in order (the parts share one item table)."""
        def stacked(name: str) -> Any:
            return np.concatenate([getattr(part, name) for part in parts])

        return cls(
            features=stacked("features"), retriever_scores=stacked("retriever_scores"),
            candidates=stacked("candidates"), valid=stacked("valid"), labels=stacked("labels"),
            query_vectors=stacked("query_vectors"), item_vectors=parts[0].item_vectors,
            last_items=stacked("last_items"),
        )

    def with_target(self) -> IntArray:
        """Queries whose target is among their candidates (the ones a ranker can learn from)."""
        found: IntArray = np.flatnonzero((self.labels > 0).any(axis=1))
        return found


class Ranker(Protocol):
    """A re-ranker: fitted on examples, scores every candidate slot (higher ranks first)."""

    name: str

    def fit(self, examples: RankingExamples) -> None: ...

    def score(self, examples: RankingExamples) -> FloatArray: ...


def reranked_ranks(scores: FloatArray, examples: RankingExamples) -> IntArray:
    """1-based pessimistic rank of each query's target under ``scores``; :data:`NEVER` when the
    target is not among the candidates. Empty slots never outrank anything."""
    masked = np.where(examples.valid, scores, -np.inf)
    has_target = (examples.labels > 0).any(axis=1)
    target_slot = np.argmax(examples.labels, axis=1)
    target_score = masked[np.arange(len(masked)), target_slot]
    ranks = (masked >= target_score[:, None]).sum(axis=1).astype(np.int64)
    return np.where(has_target & np.isfinite(target_score), ranks, NEVER)


def holdout_split(n_queries: int, share: float, seed: int) -> tuple[IntArray, IntArray]:
    """Random (fit, holdout) query indices; a ranker early-stops on the holdout."""
    order = np.random.default_rng(seed).permutation(n_queries)
    n_holdout = max(1, round(share * n_queries)) if n_queries > 1 else 0
    return np.sort(order[n_holdout:]), np.sort(order[:n_holdout])


def ndcg_at_10(ranks: IntArray) -> npt.NDArray[np.float64]:
    """Per-query NDCG@10 of one relevant item at 1-based ``ranks``."""
    r = np.minimum(ranks, 11).astype(np.float64)
    return np.where(ranks <= 10, 1.0 / np.log2(r + 1.0), 0.0)
