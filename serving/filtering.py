"""Filtering: what may never be recommended to this request, whatever the model scores.

Already-seen items (when the request asks), unavailable items (held in Redis), the request's
exclusions and category filters, and the operator's banned items and categories.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from schemas.recommendations import RecommendationRequest
from serving.ordering import BusinessRules


@dataclass(frozen=True)
class CandidateFilter:
    excluded: frozenset[str]
    include_categories: frozenset[str] | None
    excluded_categories: frozenset[str]

    @classmethod
    def for_request(
        cls,
        request: RecommendationRequest,
        seen: Iterable[str],
        unavailable: Collection[str],
        rules: BusinessRules,
    ) -> CandidateFilter:
        excluded = set(request.exclude_items)
        excluded.update(rules.banned_items)
        if request.filters.exclude_seen:
            excluded.update(seen)
        include = request.filters.include_categories
        return cls(
            # The unavailable set is shared by the batch; union once per request keeps lookups
            # O(1) without copying it when it is empty.
            excluded=frozenset(excluded).union(unavailable),
            include_categories=frozenset(include) if include is not None else None,
            excluded_categories=frozenset(request.filters.exclude_categories)
            | frozenset(rules.banned_categories),
        )

    @property
    def needs_categories(self) -> bool:
        return self.include_categories is not None or bool(self.excluded_categories)

    def allows(self, item_id: str, category: str | None) -> bool:
        if item_id in self.excluded:
            return False
        if self.include_categories is not None and category not in self.include_categories:
            # An item of unknown category cannot prove it belongs to an included one.
            return False
        return category is None or category not in self.excluded_categories

    def apply(
        self,
        candidates: Iterable[tuple[str, float]],
        categories: Mapping[str, str],
        limit: int | None = None,
    ) -> list[tuple[str, float]]:
        """Keeps allowed candidates in order, dropping duplicates (first occurrence wins) and
        empty ids (index slots without an item), stopping after `limit` kept ones."""
        kept: list[tuple[str, float]] = []
        emitted: set[str] = set()
        for item_id, score in candidates:
            if not item_id or item_id in emitted:
                continue
            if not self.allows(item_id, categories.get(item_id)):
                continue
            emitted.add(item_id)
            kept.append((item_id, score))
            if limit is not None and len(kept) >= limit:
                break
        return kept
