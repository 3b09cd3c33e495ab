"""The ranking stage's feature vectors, computed once and logged as served (`rec.features`).

The vectors are the serving feature set of models.point_in_time, computed by its own group
functions from what the scorer holds at request time: the ANN scores of the filtered candidates
(retrieval order), the version's item and query vectors, the history the version encoded, and
the candidates' item state (serving.features.StateArrays) from the scorer's table.
The monitor labels the logged vectors later (streams.monitor.join), so the ranker trains on
the vectors it serves, never on a second implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from models.item_content import ItemContent
from models.point_in_time import (
    RECENT_ITEMS,
    SERVING_FEATURE_NAMES,
    SERVING_FEATURE_SET,
    content_features,
    item_state_features,
    retriever_features,
    similarity_features,
    unit_rows,
    user_features,
)
from schemas.model_updates import major_part
from schemas.ranker_examples import ServedFeatures, encode_vectors
from serving.features import StateArrays
from serving.model_bundle import FloatArray, History, IntArray, ModelBundle

ContentLookup = Callable[[Mapping[str, int], IntArray], ItemContent]
"""(a version's item index, some of its indices) -> their content, row j + 1 for the j-th
index (serving.item_catalog.ItemCatalog.content)."""


def no_content(known: Mapping[str, int], indices: IntArray) -> ItemContent:
    """What a scorer without item metadata describes: no genres, unknown years."""
    return ItemContent.empty(len(indices))


@dataclass(frozen=True)
class CandidateVectors:
    """One request's ranking-stage input: candidates in retrieval order and their vectors."""

    item_ids: list[str]
    scores: list[float]
    """The retriever's (ANN) scores, the first feature column."""
    vectors: FloatArray
    """``[len(item_ids), len(SERVING_FEATURE_NAMES)]``."""
    features_at: float


def candidate_vectors(
    bundle: ModelBundle,
    queries: FloatArray,
    histories: Sequence[History],
    candidates: Sequence[Sequence[tuple[str, float]]],
    now: float,
    states: Callable[[Sequence[str]], StateArrays],
    content: ContentLookup = no_content,
) -> list[CandidateVectors | None]:
    """Per request, the serving feature vectors of its `candidates` (id, ANN score), whose
    version encoded its history into its row of `queries`, with the candidates' item state as
    `states` looks it up and the items' content as `content` does; None for a request with no
    candidate to describe. Requests with the same number of candidates (most of a group's) are
    computed in one vectorised pass: per request, the small array calls cost more than their
    arithmetic."""
    known = [[(i, s) for i, s in row if i in bundle.item_index] for row in candidates]
    by_count: dict[int, list[int]] = {}
    for row, kept in enumerate(known):
        if kept:
            by_count.setdefault(len(kept), []).append(row)
    out: list[CandidateVectors | None] = [None] * len(known)
    for rows in by_count.values():
        matrices = _matrices(
            bundle, queries[rows], [histories[r] for r in rows], [known[r] for r in rows], now,
            states, content,
        )
        for row, matrix in zip(rows, matrices, strict=True):
            out[row] = CandidateVectors(
                [i for i, _ in known[row]], [s for _, s in known[row]], matrix, now
            )
    return out


def _matrices(
    bundle: ModelBundle,
    queries: FloatArray,
    histories: Sequence[History],
    known: Sequence[Sequence[tuple[str, float]]],
    now: float,
    states: Callable[[Sequence[str]], StateArrays],
    content: ContentLookup,
) -> FloatArray:
    """``[q, k, len(SERVING_FEATURE_NAMES)]`` for q requests of k known candidates each."""
    q, k = len(known), len(known[0])
    indices = np.array([[bundle.item_index[i] for i, _ in kept] for kept in known], np.int64)
    recent = np.zeros((q, RECENT_ITEMS), dtype=np.int64)
    present = np.zeros((q, RECENT_ITEMS), dtype=np.bool_)
    for row, history in enumerate(histories):
        tail = [i for i, _ in history[-RECENT_ITEMS:]]
        recent[row, RECENT_ITEMS - len(tail):] = tail
        present[row, RECENT_ITEMS - len(tail):] = True
    vectors = unit_rows(bundle.recommender.item_vectors(
        np.concatenate([indices.ravel(), recent.ravel()])
    ))
    dim = vectors.shape[1]
    # Padding slots compare as zero vectors, whatever the model's padding row holds.
    recent_vectors = np.where(
        present[:, :, None], vectors[q * k :].reshape(q, RECENT_ITEMS, dim), 0.0
    ).astype(np.float32)
    scores = np.array([[s for _, s in kept] for kept in known], dtype=np.float32)
    last = np.array([h[-1][1] if h else now for h in histories], dtype=np.float64)
    first, latest, events = states([i for kept in known for i, _ in kept])
    item_state = item_state_features(first, latest, events, np.full(q * k, now, dtype=np.float64))
    parts = [
        retriever_features(scores),
        # A MIPS query carries a constant column past the item space (models.retrieval): the
        # similarity compares within the item space.
        similarity_features(vectors[: q * k].reshape(q, k, dim), recent_vectors, present,
                            unit_rows(queries[:, :dim])),
        _content(bundle, content, indices, histories),
        item_state.reshape(q, k, item_state.shape[1]),
        user_features(np.array([len(h) for h in histories], dtype=np.float64), last,
                      np.full(q, now, dtype=np.float64), k),
    ]
    return np.concatenate(parts, axis=2).astype(np.float32)


def _content(
    bundle: ModelBundle, content: ContentLookup, indices: IntArray, histories: Sequence[History]
) -> FloatArray:
    """The content group, from the content of only the items involved: the candidates and the
    histories, renumbered 1.. in the order of their version's indices."""
    history_indices = [np.array([i for i, _ in h], dtype=np.int64) for h in histories]
    involved = np.unique(np.concatenate([indices.ravel(), *history_indices]))
    known = content(bundle.item_index, involved)

    def local(version_indices: IntArray) -> IntArray:
        found: IntArray = np.searchsorted(involved, version_indices) + 1
        return found

    return content_features(known, [local(h) for h in history_indices], local(indices))


def served_features(
    request_id: str,
    user_id: str,
    served_at: float,
    model_version: str,
    ranker: PublishedRanker | None,
    logged: CandidateVectors,
    shown: Sequence[str],
) -> ServedFeatures:
    strategy: Literal["ranker", "retrieval_order"] = (
        "ranker" if ranker is not None else "retrieval_order"
    )
    return ServedFeatures(
        request_id=request_id,
        user_id=user_id,
        served_at=served_at,
        features_at=logged.features_at,
        model_version=model_version,
        ranker_version=ranker.version if ranker is not None else None,
        feature_set=SERVING_FEATURE_SET,
        n_features=len(SERVING_FEATURE_NAMES),
        candidates=logged.item_ids,
        vectors=encode_vectors(logged.vectors),
        strategy=strategy,
        shown=list(shown),
    )


class VectorRanker(Protocol):
    """Scores candidates from their serving feature vectors (models.logged_ranker)."""

    def score(self, vectors: FloatArray) -> FloatArray: ...


@dataclass(frozen=True)
class PublishedRanker:
    """A ranker the gate promoted: what the ranking stage uses while it is published."""

    version: str
    model: VectorRanker
    feature_set: str = SERVING_FEATURE_SET
    retriever_major: str | None = None
    """The retrieval model major version whose candidates the gate judged it on; None: any."""

    def reranks(self, retrieval_version: str) -> bool:
        """Whether it may re-order candidates of `retrieval_version`: a full retrain (a new
        major) changes the candidates and their scores, and the ranker waits for the gate to
        judge one on them."""
        return self.retriever_major is None or self.retriever_major == major_part(retrieval_version)


def rerank(
    lists: list[list[tuple[str, float]]],
    logged: Sequence[CandidateVectors | None],
    ranker: VectorRanker,
) -> list[list[tuple[str, float]]]:
    """Each request's candidates (retrieval order) re-ordered by the ranker's scores of their
    logged vectors, best first; candidates past the logged ones keep retrieval order below
    them. One ranker call for the whole group: a call has a fixed cost far above its rows'."""
    described = [v for v in logged if v is not None]
    if not described:
        return lists
    scores = ranker.score(np.concatenate([v.vectors for v in described]))
    out, offset = [], 0
    for candidates, vectors in zip(lists, logged, strict=True):
        if vectors is None:
            out.append(candidates)
            continue
        mine = scores[offset : offset + len(vectors.item_ids)].tolist()
        offset += len(vectors.item_ids)
        ranked = sorted(zip(vectors.item_ids, mine, strict=True), key=lambda p: -p[1])
        floor = min((s for _, s in ranked), default=0.0)
        seen = set(vectors.item_ids)
        rest = [item for item, _ in candidates if item not in seen]
        out.append(ranked + [(item, floor - 1.0 - n) for n, item in enumerate(rest)])
    return out
