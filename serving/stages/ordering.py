"""Ordering: each answer's final list, and the response that carries it.

Per answer: an answer filtering left short of k is topped up with allowed popular items, scored
below its last; the last `new_item_slots` places of a model answer's top k go to its new items
(catalog items its version does not know), scored between the items around them; then the
operator's rules: campaign boosts, category diversity, pins; the top k. Every rule is a pure
function of the ranked list, which keeps ordering deterministic and unit-testable.

The response names the version and the strategy that served it, the features' freshness (the
user's stored `lag_ms`) and the model's (published -> served); a model answer also carries
what its ranking stage saw, for `rec.features`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from schemas.ranker_examples import ServedFeatures
from schemas.recommendations import RecommendationResponse, ScoredItem
from serving.batch import Batch, Draft, Scored, Strategy
from serving.feature_log import served_features
from serving.rules import BusinessRules
from serving.stages.filtering import Allowed

MAX_SCORE = 1e6


@dataclass(frozen=True)
class Ranked:
    item_id: str
    score: float


@dataclass(frozen=True)
class Answer:
    response: RecommendationResponse
    outcome: str
    """ok (model or canary), cold_start, or empty."""
    features: ServedFeatures | None = None
    """What the ranking stage saw, for `rec.features`; None for cold-start and empty answers."""
    new_items: int = 0
    """Items of the answer its version does not know, placed from the item catalog."""


class Ordering:
    def __init__(self, clock: Callable[[], float], new_item_slots: int = 0) -> None:
        self._clock = clock
        self._new_item_slots = new_item_slots

    def answer(self, batch: Batch, allowed: Allowed) -> list[Answer]:
        return [self._answer(batch, d, allowed.categories) for d in allowed.drafts]

    def _answer(self, batch: Batch, draft: Draft, categories: Mapping[str, str]) -> Answer:
        k = draft.request.k
        candidates = backfill(draft.candidates, draft.backfill)
        new: list[str] = []
        if draft.new_items:
            shown = {i for i, _ in candidates[:k]}
            new = [i for i in draft.new_items if i not in shown][: min(self._new_item_slots, k)]
            candidates = with_new_items(candidates, new, k)
        ranked = [Ranked(i, s) for i, s in candidates]
        items = apply_rules(ranked, batch.rules, categories, k, draft.pinned)
        served_at = self._clock()
        deployment = draft.deployment
        strategy: Strategy = draft.strategy if items else "none"
        response = RecommendationResponse(
            request_id=draft.request.request_id,
            user_id=draft.request.user_id,
            status="ok",
            items=[ScoredItem(item_id=r.item_id, score=_clamp(r.score)) for r in items],
            model_version=deployment.version if deployment else None,
            strategy=strategy,
            feature_freshness_ms=_lag_ms(draft.context.feature_lag_ms),
            model_freshness_ms=_age_ms(served_at, deployment.update.published_at)
            if deployment
            else None,
            served_at=served_at,
            experiment=batch.experiment.name,
            arm=draft.arm.name,
        )
        outcome = {"model": "ok", "ranker": "ok", "canary": "ok", "popularity": "cold_start"}.get(
            strategy, "empty"
        )
        logged = None
        if deployment is not None and draft.logged is not None and items:
            logged = served_features(
                draft.request.request_id, draft.request.user_id, served_at, deployment.version,
                draft.reranker, draft.logged, [r.item_id for r in items],
            )
        placed = set(new)
        return Answer(response, outcome, logged, sum(1 for r in items if r.item_id in placed))


def backfill(answer: Scored, extra: Scored) -> Scored:
    """A short answer topped up with `extra` (allowed popular items, not in it), scored below
    its last: popularity counts are not on the model's scale."""
    if not extra:
        return answer
    floor = min((s for _, s in answer), default=0.0)
    return answer + [(i, floor - 1.0 - n) for n, (i, _) in enumerate(extra)]


def with_new_items(answer: Scored, new: Sequence[str], k: int) -> Scored:
    """`answer` (best first) with the `new` items in its last places of the top k, in their
    order, scored between the item above them and the one they push down."""
    if not new:
        return answer
    placed = set(new)
    rest = [(i, s) for i, s in answer if i not in placed]
    at = max(0, min(len(rest), k - len(new)))
    above = rest[at - 1][1] if at > 0 else 0.0
    below = rest[at][1] if at < len(rest) else above - 1.0
    step = (above - below) / (len(new) + 1)
    return [*rest[:at], *((i, above - step * (n + 1)) for n, i in enumerate(new)), *rest[at:]]


def boosted(score: float, boost: float) -> float:
    """Multiplies positive scores and divides negative ones, so a boost > 1 always promotes."""
    return score * boost if score >= 0 else score / boost


def apply_boosts(
    ranked: Sequence[Ranked], rules: BusinessRules, categories: Mapping[str, str]
) -> list[Ranked]:
    if not rules.item_boosts and not rules.category_boosts:
        return list(ranked)
    out = []
    for r in ranked:
        boost = rules.item_boosts.get(r.item_id, 1.0)
        category = categories.get(r.item_id)
        if category is not None:
            boost *= rules.category_boosts.get(category, 1.0)
        out.append(Ranked(r.item_id, boosted(r.score, boost)) if boost != 1.0 else r)
    # Stable sort: equal scores keep the ranker's order.
    return sorted(out, key=lambda r: -r.score)


def diversify(
    ranked: Sequence[Ranked], max_per_category: int | None, categories: Mapping[str, str]
) -> list[Ranked]:
    """Greedy: keep order, defer an item whose category is already full; deferred items
    backfill the tail so that k items are still returned when the catalog is narrow."""
    if max_per_category is None:
        return list(ranked)
    taken: dict[str, int] = {}
    kept: list[Ranked] = []
    deferred: list[Ranked] = []
    for r in ranked:
        category = categories.get(r.item_id)
        if category is None:
            kept.append(r)
            continue
        if taken.get(category, 0) < max_per_category:
            taken[category] = taken.get(category, 0) + 1
            kept.append(r)
        else:
            deferred.append(r)
    return kept + deferred


def pin(ranked: Sequence[Ranked], pinned: Mapping[str, int], k: int) -> list[Ranked]:
    """Places each pinned item at its position (pins beyond the list land at its end).

    `pinned` must only hold items that passed the request's filters. A pinned item takes the
    score of the item it displaces when that is higher, so scores stay comparable.
    """
    if not pinned:
        return list(ranked)
    scores = {r.item_id: r.score for r in ranked}
    rest = [r for r in ranked if r.item_id not in pinned]
    for item_id, position in sorted(pinned.items(), key=lambda p: p[1]):
        if position >= k:
            continue
        slot = min(position, len(rest))
        displaced = rest[slot].score if slot < len(rest) else None
        own = scores.get(item_id)
        candidates = [s for s in (own, displaced) if s is not None]
        rest.insert(slot, Ranked(item_id, max(candidates) if candidates else 0.0))
    return rest


def apply_rules(
    ranked: Sequence[Ranked],
    rules: BusinessRules,
    categories: Mapping[str, str],
    k: int,
    pinned: Mapping[str, int] | None = None,
) -> list[Ranked]:
    """Boost -> diversify -> pin -> top k. `ranked` is best first and already filtered."""
    boosted_list = apply_boosts(ranked, rules, categories)
    diverse = diversify(boosted_list, rules.max_per_category, categories)
    return pin(diverse, pinned if pinned is not None else rules.pinned, k)[:k]


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
