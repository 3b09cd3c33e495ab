"""The four stages for one micro-batch: retrieval -> filtering -> ranking -> ordering.

Pure request/response logic over the protocols (feature reader, model bundle, routing); Kafka
lives in serving/service.py. One feature round trip per batch, one encoder call and one ANN
search per deployment group (serving, canary), then per-request filtering, ranking and rules.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from models.item_content import ItemContent
from schemas.ranker_examples import ServedFeatures
from schemas.recommendations import RecommendationRequest, RecommendationResponse, ScoredItem
from serving.batching import BatchPlan, Group, plan_batch
from serving.cold_start import (
    CONTEXT_EVENTS,
    backfill,
    popular_candidates,
    with_new_items,
)
from serving.feature_log import (
    CandidateVectors,
    PublishedRanker,
    candidate_vectors,
    no_content,
    rerank,
    served_features,
)
from serving.features import (
    COUNTER_FIELDS,
    BatchFeatures,
    FeatureReader,
    StateArrays,
    UserContext,
)
from serving.filtering import CandidateFilter
from serving.model_bundle import FloatArray, IntArray, ModelBundle
from serving.ordering import BusinessRules, Ranked, order
from serving.registry import Deployment, Routing

logger = logging.getLogger(__name__)
MAX_SCORE = 1e6
DENSE_FEATURES = 8



class ItemMetadata(Protocol):
    """What the scorer asks of the item catalog (serving.item_catalog.ItemCatalog)."""

    def content(self, known: Mapping[str, int], indices: IntArray) -> ItemContent:
        """Genres and release years of a version's items (`known`: its item index), row j + 1
        for `indices[j]`."""
        ...

    def new_items(
        self, known: Mapping[str, int], history: Sequence[str], n: int,
        allowed: Callable[[str], bool],
    ) -> list[str]:
        """Up to n allowed items a version (its item index) does not know, best match with
        the user's item history first."""
        ...


@dataclass
class Draft:
    """One request's answer in the making."""

    candidates: list[tuple[str, float]]
    deployment: Deployment | None = None
    strategy: Literal["model", "ranker", "canary", "popularity", "none"] = "popularity"
    filtered: bool = False
    ranker: PublishedRanker | None = None
    """The published ranker that ordered the candidates; None = retrieval order."""
    logged: CandidateVectors | None = None
    """The ranking stage's input, logged with the answer (model-served requests only)."""


@dataclass(frozen=True)
class Retrieved:
    """One group's ANN search: query rows and the top candidates per row (id -1 = none)."""

    queries: FloatArray
    scores: FloatArray
    ids: IntArray


@dataclass(frozen=True)
class Answer:
    response: RecommendationResponse
    outcome: str
    """ok (model or canary), cold_start, or empty."""
    features: ServedFeatures | None = None
    """What the ranking stage saw, for `rec.features`; None for cold-start and empty answers."""
    new_items: int = 0
    """Items of the answer its version does not know, placed from the item catalog."""


class Scorer:
    def __init__(
        self,
        reader: FeatureReader,
        routing: Callable[[], Routing],
        rules: BusinessRules,
        candidates: int = 300,
        history_length: int = 50,
        clock: Callable[[], float] = time.time,
        logged_candidates: int = 100,
        ranker: Callable[[], PublishedRanker | None] = lambda: None,
        item_states: Callable[[Sequence[str]], StateArrays] | None = None,
        catalog: ItemMetadata | None = None,
        new_item_slots: int = 0,
    ) -> None:
        self.reader = reader
        self.routing = routing
        self.rules = rules
        self.candidates = candidates
        self.history_length = history_length
        self.clock = clock
        self.logged_candidates = logged_candidates
        """Candidates per answer whose feature vectors go to `rec.features` (0: none); the
        published ranker re-orders these (it scores their vectors)."""
        self.ranker = ranker
        """The gate's current ranker (None: serve retrieval order); one snapshot per batch."""
        self.item_states = item_states or reader.item_states
        """The candidates' item states for the ranking stage (the scorer service passes its
        in-memory table's lookup; by default they are read per batch)."""
        self.catalog = catalog
        """Item metadata: the ranking stage's content features and the items a version does
        not know; without one, no item has content and no answer gets new items."""
        self.new_item_slots = new_item_slots if catalog is not None else 0
        """Last places of a model answer given to items its version does not know."""

    def score_batch(self, requests: Sequence[RecommendationRequest]) -> list[Answer]:
        features = self.reader.read(requests)
        routing = self.routing()  # one snapshot for the whole batch: swaps never split it
        plan = plan_batch(features.contexts, routing, self.history_length)
        drafts = [Draft(list(features.popular)) for _ in requests]
        rules = features.config.rules or self.rules
        filters = [
            CandidateFilter.for_request(r, c.seen(), features.config.unavailable, rules)
            for r, c in zip(requests, features.contexts, strict=True)
        ]
        ranker = self.ranker() if self.logged_candidates else None
        retrieved = [self._retrieve(g, requests, filters, rules, ranker) for g in plan.groups]
        categories = self._categories(requests, features, plan, retrieved, rules)
        now = self.clock()
        for group, found in zip(plan.groups, retrieved, strict=True):
            self._filter_and_rank(
                group, found, requests, filters, features, categories, drafts, now, ranker
            )
        for position in plan.cold:
            context = features.contexts[position]
            drafts[position].candidates = popular_candidates(
                features.popular, context, categories
            )
        return [
            self._answer(r, drafts[p], features.contexts[p], filters[p], features, categories,
                         rules)
            for p, r in enumerate(requests)
        ]

    def _retrieve(
        self,
        group: Group,
        requests: Sequence[RecommendationRequest],
        filters: Sequence[CandidateFilter],
        rules: BusinessRules,
        ranker: PublishedRanker | None,
    ) -> Retrieved:
        bundle = group.deployment.bundle
        queries = bundle.recommender.encode(group.histories)
        widest = max(requests[p].k for p in group.members)
        n = min(max(self.candidates, 2 * widest), len(bundle.index))
        if group.deployment.bundle.ranker is None:
            floor = self._floor(group, ranker)
            needed = [self._needed(requests[p], filters[p], rules, floor) for p in group.members]
            bounded = [w for w in needed if w is not None]
            if len(bounded) == len(needed):
                n = min(n, max(bounded))
        scores, ids = bundle.index.search(queries, n)
        return Retrieved(queries, scores, ids)

    def _floor(self, group: Group, ranker: PublishedRanker | None) -> int:
        """Allowed candidates the published ranker re-scores for this group (0: none does)."""
        return self.logged_candidates if _reranks(group, ranker) else 0

    def _needed(
        self, request: RecommendationRequest, allowed: CandidateFilter, rules: BusinessRules,
        floor: int = 0,
    ) -> int | None:
        """Candidates that surely hold the answer when nothing re-scores them; None = all.

        Ordering uses the first `depth` allowed candidates, and at most `len(excluded)` of the
        best ones can be disallowed, so the best `depth + len(excluded)` hold them: the same
        answer as the full width (an index's best n are a prefix of its best wider list). A
        search of 300 cost 2-3x one of 60, and the seen items are what a request excludes
        most. Category filters can disallow any number: then the full width."""
        depth = self._depth(request, rules, floor)
        if depth is None or allowed.needs_categories:
            return None
        return depth + len(allowed.excluded)

    def _categories(
        self,
        requests: Sequence[RecommendationRequest],
        features: BatchFeatures,
        plan: BatchPlan,
        retrieved: Sequence[Retrieved],
        rules: BusinessRules,
    ) -> Mapping[str, str]:
        """Categories of every item a filter, rule or cold-start context may look at (one round
        trip at most, usually none: the reader caches them). A batch without category filters,
        category rules or cold requests needs none: looking up the whole popularity list for
        every batch was a tenth of the scorer's CPU."""
        needed = bool(rules.category_boosts or rules.banned_categories or rules.max_per_category)
        needed = needed or any(
            r.filters.include_categories is not None or r.filters.exclude_categories
            for r in requests
        )
        ids: list[str] = []
        if needed or plan.cold:
            ids.extend(item for item, _ in features.popular)
        for position in plan.cold:
            context = features.contexts[position]
            recent = (context.session_events or context.user_events)[-CONTEXT_EVENTS:]
            ids.extend(e.item_id for e in recent)
        if needed:
            for group, found in zip(plan.groups, retrieved, strict=True):
                item_ids = group.deployment.bundle.item_ids
                ids.extend(item_ids[i] for i in found.ids.ravel().tolist() if i > 0)
        return self.reader.categories(ids) if ids else {}

    def _depth(
        self, request: RecommendationRequest, rules: BusinessRules, floor: int = 0
    ) -> int | None:
        """How many allowed candidates ordering can use, at least the `floor` the published
        ranker re-scores; None = all of them.

        Filtering stops there: most of the few hundred retrieved candidates are only needed
        when a ranker re-scores them or a boost may lift a deep one."""
        if rules.item_boosts or rules.category_boosts:
            return None
        depth = request.k + len(rules.pinned)
        return max(depth * 4 if rules.max_per_category else depth, floor)

    def _filter_and_rank(
        self,
        group: Group,
        found: Retrieved,
        requests: Sequence[RecommendationRequest],
        filters: Sequence[CandidateFilter],
        features: BatchFeatures,
        categories: Mapping[str, str],
        drafts: list[Draft],
        now: float,
        ranker: PublishedRanker | None,
    ) -> None:
        bundle = group.deployment.bundle
        rules = features.config.rules or self.rules
        published = ranker if _reranks(group, ranker) and bundle.ranker is None else None
        filtered = []
        for row, position in enumerate(group.members):
            depth = (
                None if bundle.ranker is not None
                else self._depth(requests[position], rules, self._floor(group, ranker))
            )
            candidates = zip(
                # -1: an index slot left empty (fewer matches than asked for), never an item.
                (bundle.item_ids[i] if i > 0 else "" for i in found.ids[row].tolist()),
                found.scores[row].tolist(),
                strict=True,
            )
            filtered.append(filters[position].apply(candidates, categories, limit=depth))
        logged: list[CandidateVectors | None] = [None] * len(filtered)
        if self.logged_candidates:
            described = [kept[: self.logged_candidates] for kept in filtered]
            content = self.catalog.content if self.catalog is not None else no_content
            logged = candidate_vectors(bundle, found.queries, group.histories, described, now,
                                       self.item_states, content)
        if bundle.ranker is not None:
            contexts = [features.contexts[p] for p in group.members]
            dense = dense_features(contexts, now)
            filtered = rank(bundle, found.queries, filtered, dense)
        elif published is not None:
            filtered = rerank(filtered, logged, published.model)
        strategy: Literal["model", "ranker", "canary"] = (
            "canary" if group.canary else "ranker" if published is not None else "model"
        )
        for position, kept, vectors in zip(group.members, filtered, logged, strict=True):
            drafts[position] = Draft(kept, group.deployment, strategy, filtered=True,
                                     ranker=published, logged=vectors)

    def _with_new_items(
        self,
        request: RecommendationRequest,
        deployment: Deployment,
        context: UserContext,
        allowed: CandidateFilter,
        categories: Mapping[str, str],
        candidates: list[tuple[str, float]],
    ) -> tuple[list[tuple[str, float]], list[str]]:
        """The candidates with new items in their last places of the top k, and those items."""
        assert self.catalog is not None
        shown = {i for i, _ in candidates[: request.k]}
        history = [e.item_id for e in context.user_events or context.session_events]
        new = self.catalog.new_items(
            deployment.bundle.item_index, history, min(self.new_item_slots, request.k),
            lambda i: i not in shown and allowed.allows(i, categories.get(i)),
        )
        return with_new_items(candidates, new, request.k), new

    def _answer(
        self,
        request: RecommendationRequest,
        draft: Draft,
        context: UserContext,
        allowed: CandidateFilter,
        features: BatchFeatures,
        categories: Mapping[str, str],
        rules: BusinessRules,
    ) -> Answer:
        candidates = draft.candidates
        if not draft.filtered:
            candidates = allowed.apply(candidates, categories, limit=self._depth(request, rules))
        candidates = backfill(candidates, features.popular, allowed, categories, request.k)
        new: list[str] = []
        if self.new_item_slots and draft.deployment is not None:
            candidates, new = self._with_new_items(request, draft.deployment, context, allowed,
                                                   categories, candidates)
        pinned = {i: p for i, p in rules.pinned.items() if allowed.allows(i, categories.get(i))}
        ranked = [Ranked(i, s) for i, s in candidates]
        items = order(ranked, rules, categories, request.k, pinned)
        served_at = self.clock()
        deployment = draft.deployment
        strategy: Literal["model", "ranker", "canary", "popularity", "none"] = (
            draft.strategy if items else "none"
        )
        response = RecommendationResponse(
            request_id=request.request_id,
            user_id=request.user_id,
            status="ok",
            items=[ScoredItem(item_id=r.item_id, score=_clamp(r.score)) for r in items],
            model_version=deployment.version if deployment else None,
            strategy=strategy,
            feature_freshness_ms=_lag_ms(context.feature_lag_ms),
            model_freshness_ms=_age_ms(served_at, deployment.update.published_at)
            if deployment
            else None,
            served_at=served_at,
        )
        outcome = {"model": "ok", "ranker": "ok", "canary": "ok", "popularity": "cold_start"}.get(
            strategy, "empty"
        )
        logged = None
        if deployment is not None and draft.logged is not None and items:
            logged = served_features(
                request.request_id, request.user_id, served_at, deployment.version,
                draft.ranker, draft.logged, [r.item_id for r in items],
            )
        placed = set(new)
        return Answer(response, outcome, logged, sum(1 for r in items if r.item_id in placed))


def _reranks(group: Group, ranker: PublishedRanker | None) -> bool:
    """Whether the group's candidates get re-ordered: by the bundle's own ranker, or by the
    published one (serving group only: a canary is judged on its own retrieval)."""
    if group.deployment.bundle.ranker is not None:
        return True
    return (
        ranker is not None and not group.canary and ranker.reranks(group.deployment.version)
    )


def dense_features(contexts: Sequence[UserContext], now: float) -> FloatArray:
    """User/session counters, recency and hour-of-day (sin/cos) for the ranker."""
    rows = np.zeros((len(contexts), DENSE_FEATURES), dtype=np.float32)
    angle = 2 * math.pi * ((now % 86_400) / 86_400)
    for row, c in enumerate(contexts):
        counts = [c.counters.get(n, 0.0) for n in COUNTER_FIELDS]
        recency = max(0.0, now - c.last_event_ts) if c.last_event_ts is not None else 1e6
        counts += [c.counters.get("session_events", 0.0), recency, math.sin(angle), math.cos(angle)]
        rows[row] = counts
    return rows


def rank(
    bundle: ModelBundle,
    queries: FloatArray,
    lists: list[list[tuple[str, float]]],
    dense: FloatArray,
) -> list[list[tuple[str, float]]]:
    """Re-scores each request's filtered candidates with the ranker, best first."""
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


def _clamp(score: float) -> float:
    if not math.isfinite(score):
        return -MAX_SCORE
    return max(-MAX_SCORE, min(MAX_SCORE, score))


def _lag_ms(lag_ms: float | None) -> float | None:
    """The pipeline's lag for the user's newest event, as the feature writer stored it."""
    if lag_ms is None:
        return None
    return min(1e12, max(0.0, lag_ms))


def _age_ms(now: float, then: float | None) -> float | None:
    if then is None:
        return None
    return min(1e12, max(0.0, (now - then) * 1000.0))
