"""Small in-memory stand-ins for the scorer's protocols (no Redis, no torch, no faiss)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from schemas.model_updates import ModelUpdate
from schemas.recommendations import RecommendationRequest
from serving.features import BatchFeatures, Interaction, ServingConfig, StateArrays, UserContext
from serving.model_bundle import FloatArray, History, IntArray, ModelBundle
from serving.registry import Deployment
from serving.rules import BusinessRules


class VectorRecommender:
    """Query = the newest history item's vector: the answer follows the last interaction."""

    def __init__(self, vectors: FloatArray) -> None:
        self.vectors = vectors

    def encode(self, histories: Sequence[History]) -> FloatArray:
        return np.stack([self.vectors[h[-1][0]] for h in histories]).astype(np.float32)

    def item_vectors(self, indices: IntArray) -> FloatArray:
        return self.vectors[indices]


class ExactIndex:
    def __init__(self) -> None:
        self.ids = np.zeros(0, dtype=np.int64)
        self.vectors = np.zeros((0, 1), dtype=np.float32)

    def build(self, ids: IntArray, vectors: FloatArray) -> None:
        self.ids, self.vectors = ids, vectors

    def search(self, queries: FloatArray, n: int) -> tuple[FloatArray, IntArray]:
        scores = queries @ self.vectors.T
        order = np.argsort(-scores, axis=1, kind="stable")[:, :n]
        return np.take_along_axis(scores, order, 1).astype(np.float32), self.ids[order]

    def __len__(self) -> int:
        return len(self.ids)


def item_id(index: int) -> str:
    return f"i{index}"


def make_bundle(version: str = "1.0", n_items: int = 50, seed: int = 0) -> ModelBundle:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n_items + 1, 8)).astype(np.float32)
    index = ExactIndex()
    index.build(np.arange(1, n_items + 1, dtype=np.int64), vectors[1:])
    ids = ["", *(item_id(i) for i in range(1, n_items + 1))]
    return ModelBundle(
        version=version,
        published_at=time.time() - 60,
        item_ids=ids,
        item_index={i: n for n, i in enumerate(ids) if i},
        recommender=VectorRecommender(vectors),
        index=index,
    )


def update(version: str, stage: str = "serving") -> ModelUpdate:
    return ModelUpdate.model_validate(
        {
            "model_name": "session",
            "version": version,
            "kind": "full",
            "stage": stage,
            "sha256": "0" * 64,
            "published_at": time.time() - 60,
        }
    )


def deployment(version: str = "1.0", bundle: ModelBundle | None = None) -> Deployment:
    return Deployment(update(version), bundle or make_bundle(version), since=time.time())


def request(user: str = "u1", k: int = 5, **fields: object) -> RecommendationRequest:
    return RecommendationRequest.model_validate(
        {"request_id": f"r-{user}-{k}", "user_id": user, "session_id": f"{user}-s",
         "k": k, "sent_at": time.time(), **fields}
    )


def context(
    user: str,
    items: Sequence[str] = (),
    ts: float = 1_700_000_000.0,
    lag_ms: float | None = None,
) -> UserContext:
    events = tuple(Interaction(i, ts + n, "view") for n, i in enumerate(items))
    return UserContext(
        user_id=user, session_id=f"{user}-s", user_events=events, session_events=events,
        last_event_ts=events[-1].ts if events else None, feature_lag_ms=lag_ms,
    )


ItemState = tuple[float, float, float]
"""An item's first and last interaction time and event count."""


def state_reader(states: Mapping[str, ItemState]) -> Callable[[Sequence[str]], StateArrays]:
    """Reads `states` as Redis answers item states: an item it lacks has no interaction yet."""

    def read(item_ids: Sequence[str]) -> StateArrays:
        rows = np.array([states.get(i, (np.nan, np.nan, 0.0)) for i in item_ids],
                        dtype=np.float64).reshape(len(item_ids), 3)
        return rows[:, 0].copy(), rows[:, 1].copy(), rows[:, 2].copy()

    return read


class FakeReader:
    def __init__(
        self,
        contexts: dict[str, UserContext] | None = None,
        popular: Sequence[tuple[str, float]] = (),
        unavailable: frozenset[str] = frozenset(),
        rules: BusinessRules | None = None,
        categories: dict[str, str] | None = None,
        item_states: Mapping[str, ItemState] | None = None,
    ) -> None:
        self.contexts = contexts or {}
        self.item_states = state_reader(item_states or {})
        self.popular = list(popular)
        self.config = ServingConfig(unavailable, rules)
        self.category_map = categories or {}
        self.reads = 0

    def read(self, requests: Sequence[RecommendationRequest]) -> BatchFeatures:
        self.reads += 1
        contexts = [self.contexts.get(r.user_id, context(r.user_id)) for r in requests]
        return BatchFeatures(contexts, self.config, self.popular)

    def categories(self, item_ids: Sequence[str]) -> dict[str, str]:
        return {i: self.category_map[i] for i in item_ids if i in self.category_map}

