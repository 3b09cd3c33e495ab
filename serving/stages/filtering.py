"""Filtering: what may never be shown to a request, whatever scored it, checked in one place.

Each request excludes the items it names, the operator's banned items, the unavailable items
(held in Redis) and, when it asks so, the items the user has seen (serving.batch.excluded_items);
its category filters and the operator's banned categories exclude by category. Everything a
later stage may show passes here: the retrieved candidates (the first `depth` allowed ones),
the popular items that top up an answer left short of k, the new items of a model answer, and
the operator's pinned items.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from serving.batch import Batch, CategoryLookup, Draft, Scored
from serving.rules import BusinessRules


@dataclass(frozen=True)
class Allowed:
    """The batch's drafts with their allowed candidates, and the categories that decided them
    (those the ordering stage's rules read too)."""

    drafts: list[Draft]
    categories: Mapping[str, str]


@dataclass(frozen=True)
class Check:
    """One request's filter."""

    excluded: frozenset[str]
    include_categories: frozenset[str] | None
    excluded_categories: frozenset[str]

    @classmethod
    def of(cls, draft: Draft, rules: BusinessRules) -> Check:
        include = draft.request.filters.include_categories
        return cls(
            draft.excluded,
            frozenset(include) if include is not None else None,
            frozenset(draft.request.filters.exclude_categories)
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
        self, candidates: Iterable[tuple[str, float]], categories: Mapping[str, str],
        limit: int | None = None,
    ) -> Scored:
        """Keeps allowed candidates in order, dropping duplicates (first occurrence wins) and
        empty ids (index slots without an item), stopping after `limit` kept ones."""
        kept: Scored = []
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


class Filtering:
    def __init__(self, categories: CategoryLookup) -> None:
        self._categories = categories

    def allow(self, batch: Batch, drafts: list[Draft]) -> Allowed:
        checks = [Check.of(d, batch.rules) for d in drafts]
        categories = self._lookup(batch, drafts, checks)
        for draft, check in zip(drafts, checks, strict=True):
            self._filter(batch, draft, check, categories)
        return Allowed(drafts, categories)

    def _lookup(
        self, batch: Batch, drafts: list[Draft], checks: list[Check]
    ) -> Mapping[str, str]:
        """Categories of every item a filter or rule looks at: one round trip at most, usually
        none (the reader caches them). A batch without category filters or category rules needs
        none: looking up the whole popularity list for every batch was a tenth of the scorer's
        CPU."""
        if not (batch.rules.use_categories or any(c.needs_categories for c in checks)):
            return {}
        ids = [item for item, _ in batch.popular] + list(batch.rules.pinned)
        ids += [item for d in drafts for item, _ in d.candidates]
        ids += [item for d in drafts for item in d.new_items]
        return self._categories([i for i in ids if i])

    def _filter(
        self, batch: Batch, draft: Draft, check: Check, categories: Mapping[str, str]
    ) -> None:
        k = draft.request.k
        draft.candidates = check.apply(draft.candidates, categories, limit=draft.depth)
        if len(draft.candidates) < k:
            present = {item for item, _ in draft.candidates}
            popular = ((i, s) for i, s in batch.popular if i not in present)
            draft.backfill = check.apply(popular, categories, limit=k - len(draft.candidates))
        if draft.new_items:
            unscored = ((i, 0.0) for i in draft.new_items)
            draft.new_items = [i for i, _ in check.apply(unscored, categories)]
        draft.pinned = {
            item: at for item, at in batch.rules.pinned.items()
            if check.allows(item, categories.get(item))
        }
