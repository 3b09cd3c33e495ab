"""What the four stages pass along: the micro-batch's inputs, read once, and each request's
answer in the making.

A batch is one snapshot: one feature round trip, one serving configuration (rules, experiment),
one routing (model swaps never split a batch), one set of pinned versions and one published
ranker, whatever happens meanwhile. Each request's facts are settled with it: its exclusions,
its experiment arm and the live version routing gives its user.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from schemas.recommendations import RecommendationRequest
from serving.experiment import Experiment, ExperimentArm
from serving.feature_log import CandidateVectors, PublishedRanker
from serving.features import BatchFeatures, UserContext
from serving.model_bundle import FloatArray, History
from serving.registry import Deployment, Routing
from serving.rules import BusinessRules

Strategy = Literal["model", "ranker", "canary", "popularity", "none"]
Scored = list[tuple[str, float]]
"""Item ids with scores, best first."""
CategoryLookup = Callable[[Sequence[str]], Mapping[str, str]]
"""Categories of the given items that have one (serving.features.RedisFeatureReader)."""


@dataclass(frozen=True)
class Batch:
    drafts: list[Draft]
    """One per request, in their order."""
    popular: Sequence[tuple[str, float]]
    """Most popular items recently, best first."""
    rules: BusinessRules
    experiment: Experiment
    pinned: Mapping[str, Deployment]
    """The loaded versions frozen arms pin, by version."""
    ranker: PublishedRanker | None
    """The published ranker (None: none passed the gate)."""
    now: float

    @classmethod
    def of(
        cls,
        requests: Sequence[RecommendationRequest],
        features: BatchFeatures,
        rules: BusinessRules,
        experiment: Experiment,
        routing: Routing,
        pinned: Mapping[str, Deployment],
        ranker: PublishedRanker | None,
        now: float,
    ) -> Batch:
        unavailable = features.config.unavailable
        drafts = [
            Draft(r, c, excluded_items(r, c, unavailable, rules), experiment.assign(r.user_id),
                  routing.route(r.user_id))
            for r, c in zip(requests, features.contexts, strict=True)
        ]
        return cls(drafts, features.popular, rules, experiment, pinned, ranker, now)


@dataclass
class Draft:
    """One request's answer in the making; each stage fills in its part."""

    request: RecommendationRequest
    context: UserContext
    excluded: frozenset[str]
    """Items never recommended to this request (see `excluded_items`)."""
    arm: ExperimentArm
    routed: tuple[Deployment | None, bool]
    """The live version routing gives the user, and whether it is the canary."""
    # retrieval
    strategy: Strategy = "popularity"
    deployment: Deployment | None = None
    """The model version answering; None for popularity."""
    canary: bool = False
    history: History = ()
    """What the version encoded: (item index, event time), oldest first."""
    query: FloatArray | None = None
    depth: int | None = None
    """Allowed candidates the later stages use (None: all retrieved)."""
    reranker: PublishedRanker | None = None
    """The published ranker that re-orders the candidates (None: it does not)."""
    own_ranker: bool = False
    """The version's own ranker re-scores the candidates."""
    candidates: Scored = field(default_factory=list)
    new_items: list[str] = field(default_factory=list)
    """Catalog items the version does not know, best match with the user first."""
    # filtering
    backfill: Scored = field(default_factory=list)
    """Allowed popular items for an answer filtering left short of k."""
    pinned: dict[str, int] = field(default_factory=dict)
    """The rules' pins this request allows."""
    # ranking
    logged: CandidateVectors | None = None
    """The ranking stage's input, logged with the answer (model-served requests only)."""


def excluded_items(
    request: RecommendationRequest,
    context: UserContext,
    unavailable: Collection[str],
    rules: BusinessRules,
) -> frozenset[str]:
    """The request's exclusions, the rules' banned items, the unavailable items, and the items
    the user has seen when the request asks so."""
    excluded = set(request.exclude_items)
    excluded.update(rules.banned_items)
    if request.filters.exclude_seen:
        excluded.update(context.seen())
    # The unavailable set is shared by the batch: one union per request keeps lookups O(1)
    # without copying it when it is empty.
    return frozenset(excluded).union(unavailable)
