"""Retrieval: which policy answers each request, and its candidates in retrieval order.

The user's experiment arm names the policy (serving/experiment.py):

- **Model** (arms `model`, `ranker`, `frozen`): a version encodes the history it reads, built
  from the user's events as its training sequences are (models/query_history.py); faiss returns
  its best candidates. One encoder call and one ANN search per version for the whole
  batch. The version is the live one routing gives the user (the serving one, or the canary for
  the canary share of users), or, for a `frozen` arm, the version it pins. In a `ranker` arm the
  published ranker will re-order the candidates of the serving version it was judged on (not
  the canary's, which is judged on its own retrieval), and a version that carries its own
  ranker re-scores with that instead; the other arms keep retrieval order. A model answer also
  gets the catalog items its version does not know, best genre match with the user's recent
  items first: the ordering stage gives them the answer's last places.
- **Popularity** (arm `popularity`, and cold start in every arm: no version to answer, or the
  version knows none of the user's items): recent popularity, nudged by context: popular items
  in the categories the session has just touched come first. The answer keeps the user's arm.

How many candidates: the ordering stage uses the first `depth` allowed ones (at least the
`logged_candidates` the ranking stage logs for the ranker, in every model answer), and at most
`len(excluded)` of the best ones can be disallowed, so the best `depth + len(excluded)` hold
them: the same answer as any wider search (an index's best n are a prefix of its best wider
list), and as the offline reference's full ranking. That many are searched, fewer or more than
`candidates`: a search of 300 cost 2-3x one of 60, and a user who has seen more than 300 items
would otherwise get an answer short of what filtering removed (topped up with popular items).
Category filters can disallow any number: then `candidates`, at least twice k.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from models.query_history import query_history
from serving.batch import Batch, CategoryLookup, Draft, Scored
from serving.features import UserContext
from serving.registry import Deployment
from serving.rules import BusinessRules

CONTEXT_BOOST = 2.0
"""Multiplier for popular items in a category of the session's recent events."""
CONTEXT_EVENTS = 5
"""The newest events whose categories count as the session's context."""
NEW_ITEM_MARGIN = 4
"""New items a model answer considers: this many times what it can show (its slots and its
top k, which a backfilled item may share), so its exclusions rarely leave it short."""
NewItems = Callable[[Mapping[str, int], Sequence[str], int], list[str]]
"""(a version's item index, the user's item history, n) -> up to n catalog items the version
does not know, best match first (serving.item_catalog.ItemCatalog.new_items)."""


class Retrieval:
    def __init__(
        self,
        categories: CategoryLookup,
        candidates: int = 300,
        history_length: int = 50,
        logged_candidates: int = 100,
        new_items: NewItems | None = None,
        new_item_slots: int = 0,
    ) -> None:
        self._categories = categories
        self._candidates = candidates
        self._history_length = history_length
        self._logged_candidates = logged_candidates
        """Allowed candidates the published ranker re-scores (it scores their logged vectors)."""
        self._new_items = new_items if new_item_slots else None
        self._new_item_slots = new_item_slots

    def retrieve(self, batch: Batch) -> list[Draft]:
        answers = batch.drafts
        for draft in answers:
            self._route(batch, draft)
        groups: dict[int, list[Draft]] = {}
        for draft in answers:
            if draft.deployment is not None:
                groups.setdefault(id(draft.deployment), []).append(draft)
        for group in groups.values():
            self._search(group, batch.rules)
        cold = [d for d in answers if d.deployment is None]
        if cold:
            self._popularity(batch, cold)
        if self._new_items is not None:
            for draft in answers:
                if draft.deployment is not None:
                    history = [e.item_id for e in draft.context.history]
                    k = draft.request.k
                    n = NEW_ITEM_MARGIN * (min(self._new_item_slots, k) + k)
                    draft.new_items = self._new_items(
                        draft.deployment.bundle.item_index, history, n
                    )
        return answers

    def _route(self, batch: Batch, draft: Draft) -> None:
        policy = draft.arm.policy
        if policy == "popularity":
            return
        if draft.arm.version is not None:
            deployment, canary = batch.pinned.get(draft.arm.version), False
        else:
            deployment, canary = draft.routed
        if deployment is None:
            return
        events = ((e.item_id, e.ts) for e in draft.context.history)
        history = query_history(events, deployment.bundle.item_index, self._history_length)
        if not history:
            return  # the version knows none of the user's items: cold start
        draft.deployment, draft.canary, draft.history = deployment, canary, history
        draft.own_ranker = policy == "ranker" and deployment.bundle.ranker is not None
        ranker = batch.ranker
        if policy == "ranker" and not canary and not draft.own_ranker and ranker is not None and (
            ranker.reranks(deployment.version)
        ):
            draft.reranker = ranker
        draft.strategy = "canary" if canary else "ranker" if draft.reranker else "model"
        # Every model answer keeps (and the ranking stage logs) its first `logged_candidates`
        # allowed candidates, whichever arm: the ranker learns from these lists which
        # candidates below the top k deserve a place in it, and a list cut at k teaches it
        # nothing a hit@k can see.
        draft.depth = None if draft.own_ranker else depth(
            batch.rules, draft.request.k, self._logged_candidates
        )

    def _search(self, group: list[Draft], rules: BusinessRules) -> None:
        deployment: Deployment = group[0].deployment  # type: ignore[assignment]
        bundle = deployment.bundle
        queries = bundle.recommender.encode([d.history for d in group])
        scores, ids = bundle.index.search(queries, self._width(group, rules, len(bundle.index)))
        for row, draft in enumerate(group):
            draft.query = queries[row]
            draft.candidates = list(zip(
                # -1: an index slot left empty (fewer matches than asked for), never an item.
                (bundle.item_ids[i] if i > 0 else "" for i in ids[row].tolist()),
                scores[row].tolist(),
                strict=True,
            ))

    def _width(self, group: list[Draft], rules: BusinessRules, indexed: int) -> int:
        """Candidates that surely hold every answer of the group (module docstring)."""
        needed = [_needed(d, rules) for d in group]
        bounded = [w for w in needed if w is not None]
        if len(bounded) == len(needed):
            return min(max(bounded), indexed)
        widest = max(d.request.k for d in group)
        return min(max(self._candidates, 2 * widest), indexed)

    def _popularity(self, batch: Batch, cold: list[Draft]) -> None:
        recent = [_recent(d.context) for d in cold]
        ids = [item for item, _ in batch.popular] + [i for items in recent for i in items]
        categories = self._categories(ids)
        for draft, items in zip(cold, recent, strict=True):
            draft.candidates = popular_candidates(batch.popular, items, categories)
            draft.depth = depth(batch.rules, draft.request.k)


def depth(rules: BusinessRules, k: int, floor: int = 0) -> int | None:
    """How many allowed candidates ordering can use for an answer of k items, at least the
    `floor` the ranking stage logs and a ranker re-scores; None = all of them (a boost may lift
    any candidate).

    Filtering stops there: most of the few hundred retrieved candidates are only needed when a
    boost may lift a deep one."""
    if rules.item_boosts or rules.category_boosts:
        return None
    depth = k + len(rules.pinned)
    return max(depth * 4 if rules.max_per_category else depth, floor)


def _needed(draft: Draft, rules: BusinessRules) -> int | None:
    filters = draft.request.filters
    if draft.depth is None or filters.include_categories is not None or (
        filters.exclude_categories or rules.banned_categories
    ):
        return None
    return draft.depth + len(draft.excluded)


def _recent(context: UserContext) -> list[str]:
    return [e.item_id for e in (context.session_events or context.user_events)[-CONTEXT_EVENTS:]]


def popular_candidates(
    popular: Sequence[tuple[str, float]], recent: Sequence[str], categories: Mapping[str, str]
) -> Scored:
    """Popular items, best first, those in the categories of the `recent` items boosted."""
    wanted = {c for i in recent if (c := categories.get(i))}
    if not wanted:
        return list(popular)
    boosted = [
        (item_id, score * CONTEXT_BOOST if categories.get(item_id) in wanted else score)
        for item_id, score in popular
    ]
    return sorted(boosted, key=lambda p: -p[1])
