"""Ranking: the order of each model answer's allowed candidates, and the vectors it was set by.

The first `logged_candidates` allowed candidates of every model answer are described by the
serving feature set (serving/feature_log.py: the retriever's scores, similarities with the
history, content from the item catalog, item state from the scorer's table), and logged with
the answer as the ranker's training data. Then, per answer:

- the published ranker re-orders them when retrieval marked it to (candidates past the logged
  ones keep retrieval order below them); one ranker call per version for the whole batch;
- a version that carries its own ranker re-scores with it (query vectors, candidate vectors and
  the user's counters);
- otherwise retrieval order stands.

Popularity answers keep their order (retrieval set it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from serving.batch import Batch, Draft, Scored
from serving.feature_log import ContentLookup, candidate_vectors, no_content, rerank
from serving.features import COUNTER_FIELDS, StateArrays, UserContext
from serving.model_bundle import FloatArray, ModelBundle
from serving.stages.filtering import Allowed

DENSE_FEATURES = 8


class Ranking:
    def __init__(
        self,
        item_states: Callable[[Sequence[str]], StateArrays],
        content: ContentLookup = no_content,
        logged_candidates: int = 100,
    ) -> None:
        self._item_states = item_states
        """The candidates' item states (the scorer's in-memory table's lookup)."""
        self._content = content
        self._logged_candidates = logged_candidates

    def rank(self, batch: Batch, allowed: Allowed) -> Allowed:
        groups: dict[int, list[Draft]] = {}
        for draft in allowed.drafts:
            if draft.deployment is not None:
                groups.setdefault(id(draft.deployment), []).append(draft)
        for group in groups.values():
            if self._logged_candidates:
                self._describe(batch, group)
            self._own_ranker(batch, [d for d in group if d.own_ranker])
            self._published_ranker([d for d in group if d.reranker is not None])
        return allowed

    def _describe(self, batch: Batch, group: list[Draft]) -> None:
        bundle = group[0].deployment.bundle  # type: ignore[union-attr]
        logged = candidate_vectors(
            bundle, _queries(group), [d.history for d in group],
            [d.candidates[: self._logged_candidates] for d in group], batch.now,
            self._item_states, self._content,
        )
        for draft, vectors in zip(group, logged, strict=True):
            draft.logged = vectors

    @staticmethod
    def _own_ranker(batch: Batch, drafts: list[Draft]) -> None:
        if not drafts:
            return
        bundle = drafts[0].deployment.bundle  # type: ignore[union-attr]
        dense = dense_features([d.context for d in drafts], batch.now)
        ranked = own_ranker_order(bundle, _queries(drafts), [d.candidates for d in drafts], dense)
        for draft, candidates in zip(drafts, ranked, strict=True):
            draft.candidates = candidates

    @staticmethod
    def _published_ranker(drafts: list[Draft]) -> None:
        if not drafts:
            return
        ranker = drafts[0].reranker
        assert ranker is not None
        ranked = rerank([d.candidates for d in drafts], [d.logged for d in drafts], ranker.model)
        for draft, candidates in zip(drafts, ranked, strict=True):
            draft.candidates = candidates


def _queries(drafts: list[Draft]) -> FloatArray:
    return np.stack([d.query for d in drafts if d.query is not None])


def dense_features(contexts: Sequence[UserContext], now: float) -> FloatArray:
    """User/session counters, recency and hour-of-day (sin/cos) for a version's own ranker."""
    rows = np.zeros((len(contexts), DENSE_FEATURES), dtype=np.float32)
    angle = 2 * math.pi * ((now % 86_400) / 86_400)
    for row, c in enumerate(contexts):
        counts = [c.counters.get(n, 0.0) for n in COUNTER_FIELDS]
        recency = max(0.0, now - c.last_event_ts) if c.last_event_ts is not None else 1e6
        counts += [c.counters.get("session_events", 0.0), recency, math.sin(angle), math.cos(angle)]
        rows[row] = counts
    return rows


def own_ranker_order(
    bundle: ModelBundle, queries: FloatArray, lists: list[Scored], dense: FloatArray
) -> list[Scored]:
    """Re-scores each request's filtered candidates with the version's own ranker, best first."""
    assert bundle.ranker is not None
    width = max((len(c) for c in lists), default=0)
    if width == 0:
        return lists
    matrix = np.zeros((len(lists), width), dtype=np.int64)
    for row, candidates in enumerate(lists):
        indices = [bundle.item_index[i] for i, _ in candidates]
        matrix[row, : len(indices)] = indices or [1]
        matrix[row, len(indices) :] = indices[0] if indices else 1  # padding, scores ignored
    scores = bundle.ranker.score(queries, matrix, dense)
    out = []
    for row, candidates in enumerate(lists):
        scored = [(i, float(s)) for (i, _), s in zip(candidates, scores[row], strict=False)]
        out.append(sorted(scored, key=lambda p: -p[1]))
    return out
