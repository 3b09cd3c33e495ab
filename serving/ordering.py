"""Ordering: business rules applied after ranking (campaign boosts, pins, bans, diversity).

Rules come from configuration (`ServeSettings.rules`) or, while present, from a JSON document in
Redis (see serving/features.py), so operators change them without a redeploy. Every rule is a
pure function of the ranked list, which keeps ordering deterministic and unit-testable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from schemas.fields import Id, IdList
from schemas.limits import MAX_K

Boost = Annotated[float, Field(gt=0.0, le=1000.0)]


class BusinessRules(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    item_boosts: Annotated[dict[Id, Boost], Field(max_length=10_000)] = Field(
        default_factory=dict, description="Campaign multipliers per item (>1 promotes)."
    )
    category_boosts: Annotated[dict[Id, Boost], Field(max_length=1_000)] = Field(
        default_factory=dict, description="Campaign multipliers per category."
    )
    pinned: Annotated[dict[Id, Annotated[int, Field(ge=0, lt=MAX_K)]], Field(max_length=100)] = (
        Field(default_factory=dict, description="Item -> 0-based position it must occupy.")
    )
    banned_items: IdList = Field(default_factory=list)
    banned_categories: IdList = Field(default_factory=list)
    max_per_category: int | None = Field(
        None, ge=1, le=MAX_K, description="Diversity: at most this many items of one category "
        "before items of other categories (soft: backfilled when nothing else is left).",
    )


@dataclass(frozen=True)
class Ranked:
    item_id: str
    score: float


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


def order(
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
