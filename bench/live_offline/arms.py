"""The serving policies, each the scorer's own code (serving.scorer.Scorer) over the replay's
state: an in-memory feature reader stands for Redis, a fixed routing for `model.updates`.

- `popularity`: no model version routes, so every request takes the cold-start path (recent
  popularity, seen items filtered);
- `frozen`: version 1.0 for the whole replay, retrieval order;
- `model`: the newest version the online trainer published, retrieval order;
- `ranker`: the same version, re-ordered by the ranker the ranker gate published (retrieval
  order until one is).

A learned arm answers a user whose history holds no item its version knows from popularity,
as the scorer does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from schemas.model_updates import ModelUpdate
from schemas.recommendations import RecommendationRequest
from serving.feature_log import PublishedRanker
from serving.features import BatchFeatures, ServingConfig, StateArrays, UserContext
from serving.item_catalog import ItemCatalog
from serving.model_bundle import ModelBundle
from serving.ordering import BusinessRules
from serving.registry import Deployment, Routing
from serving.scorer import Answer, Scorer
from serving.settings import ServeSettings

ARMS = ("popularity", "frozen", "model", "ranker")
_DIGEST = "0" * 64
"""Routing records name a digest; the replay loads versions itself, so none is checked."""


@dataclass
class ReplayReader:
    """The scorer's FeatureReader over the replay's state: each request's context as of its
    own slot, the popularity list and item states of the batch's first slot."""

    contexts: dict[str, UserContext] = field(default_factory=dict)
    popular: list[tuple[str, float]] = field(default_factory=list)
    states: Callable[[Sequence[str]], StateArrays] | None = None

    def read(self, requests: Sequence[RecommendationRequest]) -> BatchFeatures:
        return BatchFeatures(
            [self.contexts[r.request_id] for r in requests],
            ServingConfig(frozenset(), None),
            self.popular,
        )

    def categories(self, item_ids: Sequence[str]) -> dict[str, str]:
        return {}

    def item_states(self, item_ids: Sequence[str]) -> StateArrays:
        assert self.states is not None
        return self.states(item_ids)


@dataclass
class ArmScorer:
    """One policy: a Scorer whose routing and ranker the replay sets before each batch."""

    scorer: Scorer
    routing: Routing = field(default_factory=Routing)
    ranker: PublishedRanker | None = None
    now: float = 0.0

    def route(self, bundle: ModelBundle | None) -> None:
        if bundle is None:
            self.routing = Routing()
            return
        current = self.routing.serving
        if current is not None and current.bundle is bundle:
            return
        update = ModelUpdate(model_name="session_transformer", version=bundle.version,
                             kind="full", sha256=_DIGEST, published_at=bundle.published_at)
        self.routing = Routing(serving=Deployment(update, bundle, bundle.published_at))

    def answer(self, requests: Sequence[RecommendationRequest], now: float) -> list[Answer]:
        self.now = now
        return self.scorer.score_batch(requests)


def arm_scorer(
    reader: ReplayReader, serve: ServeSettings, catalog: ItemCatalog | None, logged: bool
) -> ArmScorer:
    """A policy's scorer with the serving settings' stages; `logged`: it computes the ranking
    stage's vectors (the ranker arm logs them and re-orders by them)."""
    holder: list[ArmScorer] = []
    scorer = Scorer(
        reader,
        lambda: holder[0].routing,
        BusinessRules(),
        candidates=serve.candidates,
        history_length=serve.history_length,
        clock=lambda: holder[0].now if holder else time.time(),
        logged_candidates=serve.logged_candidates if logged else 0,
        ranker=lambda: holder[0].ranker,
        item_states=reader.item_states,
        catalog=catalog,
        new_item_slots=serve.new_item_slots,
    )
    holder.append(ArmScorer(scorer))
    return holder[0]

