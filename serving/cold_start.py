"""Cold start: answers for users and sessions the model cannot encode, never an error, and
places for items the model does not know yet.

Recent popularity (this hour plus half of the previous one, from the feature store), nudged by
context: popular items in the categories the session has just touched come first. Also the
backfill when filters leave a model answer short of k items. New items (in the catalog, unknown
to the serving version) take the last places of a model answer (:func:`with_new_items`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from serving.features import UserContext
from serving.filtering import CandidateFilter

CONTEXT_BOOST = 2.0
"""Multiplier for popular items in a category of the session's recent events."""

CONTEXT_EVENTS = 5
"""The newest events whose categories count as the session's context."""


def context_categories(context: UserContext, categories: Mapping[str, str]) -> set[str]:
    recent = (context.session_events or context.user_events)[-CONTEXT_EVENTS:]
    return {c for e in recent if (c := categories.get(e.item_id))}


def popular_candidates(
    popular: Sequence[tuple[str, float]],
    context: UserContext,
    categories: Mapping[str, str],
) -> list[tuple[str, float]]:
    """Popular items, best first, with the session's categories boosted."""
    wanted = context_categories(context, categories)
    if not wanted:
        return list(popular)
    boosted = [
        (item_id, score * CONTEXT_BOOST if categories.get(item_id) in wanted else score)
        for item_id, score in popular
    ]
    return sorted(boosted, key=lambda p: -p[1])


def backfill(
    answer: list[tuple[str, float]],
    popular: Sequence[tuple[str, float]],
    allowed: CandidateFilter,
    categories: Mapping[str, str],
    k: int,
) -> list[tuple[str, float]]:
    """Tops up a short answer with allowed popular items, scored below the answer's last."""
    if len(answer) >= k:
        return answer
    present = {item_id for item_id, _ in answer}
    floor = min((s for _, s in answer), default=0.0)
    extra = allowed.apply(((i, s) for i, s in popular if i not in present), categories)
    # Popularity counts are not on the model's scale: keep them strictly below the model's items.
    return answer + [(i, floor - 1.0 - n) for n, (i, _) in enumerate(extra[: k - len(answer)])]


def with_new_items(
    answer: list[tuple[str, float]], new: Sequence[str], k: int
) -> list[tuple[str, float]]:
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
