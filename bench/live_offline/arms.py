"""The experiment's arms, answered by the scorer's own code (serving.pipeline.Scorer) over the
replay's state: an in-memory feature reader stands for Redis, a fixed routing for
`model.updates`, the pinned versions for the scorer's pinned loader.

One Scorer whose configured experiment has the replay's arms (serving/experiment.py), each
naming its policy:

- `popularity`: recent popularity, seen items filtered (the cold-start answer);
- `frozen`: version 1.0, pinned for the whole replay, retrieval order;
- `model`: the newest version the online trainer published, retrieval order;
- `ranker`: the same version, re-ordered by the ranker the ranker gate published (retrieval
  order until one is).

Users are assigned by the experiment's own hash, as live. Only an offline replay can also ask
every arm for every request: it answers the batch once per arm under a one-arm experiment
document, as an operator sets one at run time (the arms' `counterfactual` view).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from schemas.model_updates import ModelUpdate
from schemas.recommendations import RecommendationRequest
from serving.experiment import Experiment, ExperimentArm, Policy
from serving.feature_log import PublishedRanker
from serving.features import BatchFeatures, ServingConfig, StateArrays, UserContext
from serving.item_catalog import ItemCatalog
from serving.model_bundle import ModelBundle
from serving.pipeline import Scorer
from serving.registry import Deployment, Routing
from serving.rules import BusinessRules
from serving.settings import ServeSettings
from serving.stages.ordering import Answer

ARMS: tuple[Policy, ...] = ("popularity", "frozen", "model", "ranker")
EXPERIMENT = "live-offline"
_DIGEST = "0" * 64
"""Routing records name a digest; the replay loads versions itself, so none is checked."""


@dataclass
class ReplayReader:
    """The scorer's FeatureReader over the replay's state: each request's context as of its
    own slot, the popularity list and item states of the batch's first slot, and the
    experiment document in force (None: the configured experiment)."""

    contexts: dict[str, UserContext] = field(default_factory=dict)
    popular: list[tuple[str, float]] = field(default_factory=list)
    states: Callable[[Sequence[str]], StateArrays] | None = None
    experiment: Experiment | None = None

    @property
    def config(self) -> ServingConfig:
        return ServingConfig(frozenset(), None, self.experiment)

    def read(self, requests: Sequence[RecommendationRequest]) -> BatchFeatures:
        return BatchFeatures([self.contexts[r.request_id] for r in requests], self.config,
                             self.popular)

    def categories(self, item_ids: Sequence[str]) -> dict[str, str]:
        return {}

    def item_states(self, item_ids: Sequence[str]) -> StateArrays:
        assert self.states is not None
        return self.states(item_ids)


def experiment(arms: Sequence[str], salt: str, frozen_version: str) -> Experiment:
    """The replay's experiment: each arm named after its policy, equal weights, `frozen`
    pinning the version."""
    return Experiment(name=EXPERIMENT, salt=salt, arms=tuple(
        ExperimentArm.model_validate(
            {"name": a, "policy": a, **({"version": frozen_version} if a == "frozen" else {})}
        )
        for a in arms
    ))


@dataclass
class ReplayScorer:
    """The Scorer with the replay's routing, pinned versions and ranker, set before each
    batch."""

    scorer: Scorer
    reader: ReplayReader
    routing: Routing = field(default_factory=Routing)
    pinned: Mapping[str, Deployment] = field(default_factory=dict)
    ranker: PublishedRanker | None = None
    now: float = 0.0
    _deployments: dict[int, Deployment] = field(default_factory=dict)
    _alone: dict[str, Experiment] = field(default_factory=dict)

    def arm(self, user_id: str) -> str:
        """The user's arm in the configured experiment (the scorer's own assignment)."""
        return self.scorer.arm(user_id)[1].name

    def route(self, serving: ModelBundle, frozen: ModelBundle,
              ranker: PublishedRanker | None) -> None:
        self.routing = Routing(serving=self._deployment(serving))
        self.pinned = {frozen.version: self._deployment(frozen)}
        self.ranker = ranker

    def _deployment(self, bundle: ModelBundle) -> Deployment:
        deployment = self._deployments.get(id(bundle))
        if deployment is None or deployment.bundle is not bundle:
            update = ModelUpdate(model_name="session_transformer", version=bundle.version,
                                 kind="full", sha256=_DIGEST, published_at=bundle.published_at)
            deployment = Deployment(update, bundle, bundle.published_at)
            self._deployments[id(bundle)] = deployment
        return deployment

    def answer(self, requests: Sequence[RecommendationRequest], now: float,
               arm: str | None = None) -> list[Answer]:
        """Every request answered by its assigned arm (`arm` None), or every request by that
        arm's policy (a one-arm experiment document)."""
        self.now = now
        if arm is not None:
            self.reader.experiment = self._alone.get(arm) or self._alone.setdefault(
                arm, _alone(self.scorer.experiment(), arm))
        try:
            return self.scorer.score_batch(requests)
        finally:
            self.reader.experiment = None


def _alone(configured: Experiment, arm: str) -> Experiment:
    """An experiment of the configured one's `arm` alone: every user in it."""
    chosen = next(a for a in configured.arms if a.name == arm)
    return Experiment(name=configured.name, arms=(chosen.model_copy(update={"weight": 1.0}),))


def replay_scorer(reader: ReplayReader, serve: ServeSettings, catalog: ItemCatalog | None,
                  configured: Experiment) -> ReplayScorer:
    """The scorer with the serving settings' stages and the replay's experiment."""
    holder: list[ReplayScorer] = []
    scorer = Scorer(
        reader,
        lambda: holder[0].routing,
        BusinessRules(),
        candidates=serve.candidates,
        history_length=serve.history_length,
        clock=lambda: holder[0].now,
        logged_candidates=serve.logged_candidates,
        ranker=lambda: holder[0].ranker,
        item_states=reader.item_states,
        catalog=catalog,
        new_item_slots=serve.new_item_slots,
        experiment=configured,
        pinned=lambda: holder[0].pinned,
    )
    holder.append(ReplayScorer(scorer, reader))
    return holder[0]
