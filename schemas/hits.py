"""The one definition of a hit: what counts as success for an answer, everywhere it is counted
(the monitor's KPIs, the demo's client, every bench). docs/architecture.md ("What a hit is")
explains the choices.

An answer shows `items` (best first) at `served_at`. What the user did afterwards is a list of
`Act`s: only a click, add-to-cart or purchase is a choice (a view is exposure, not a choice).

- strict hit@k: the user's next act at or after `served_at`, within the attribution window, is
  on one of the top k items;
- NDCG@k of that next act's item: 1 / log2(rank + 1) when it is at rank <= k, else 0;
- window hit@k: any of the user's acts within the attribution window is on one of the top k
  items, an act naming another request (its `context.request_id`) excepted: the application
  said which answer it came from. A click among those acts is a click-through, a purchase a
  conversion.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from schemas.events import EventType

ACTS = frozenset({EventType.CLICK, EventType.ADD_TO_CART, EventType.PURCHASE})
"""The interactions that are choices; a view is not one."""

NDCG_K = 10


def is_act(event_type: EventType) -> bool:
    return event_type in ACTS


@dataclass(frozen=True)
class Act:
    """One choice of the user: what, when, and the request it names (None when it names none)."""

    item_id: str
    timestamp: float
    event_type: EventType
    request_id: str | None = None


@dataclass(frozen=True)
class HitOutcome:
    strict_hit: bool
    window_hit: bool
    clicked: bool
    converted: bool
    ndcg: float
    """NDCG@`NDCG_K` of the next act's item (0.0 when there is no next act)."""


def strict_hit(items: Sequence[str], next_item: str | None, k: int) -> bool:
    """The next act's item is one of the top k."""
    return next_item is not None and next_item in items[:k]


def ndcg(items: Sequence[str], next_item: str | None, k: int = NDCG_K) -> float:
    """NDCG@k of a single relevant item: its ideal DCG is 1."""
    if next_item is None:
        return 0.0
    for rank, item in enumerate(items[:k], start=1):
        if item == next_item:
            return 1.0 / math.log2(rank + 1)
    return 0.0


def judge(
    items: Sequence[str],
    served_at: float,
    window_s: float,
    acts: Iterable[Act],
    k: int,
    request_id: str | None = None,
) -> HitOutcome:
    """Every figure of one answer from the user's acts (any order; acts outside
    [served_at, served_at + window_s] and non-choices are ignored)."""
    top = frozenset(items[:k])
    inside = sorted(
        (a for a in acts
         if is_act(a.event_type) and served_at <= a.timestamp <= served_at + window_s),
        key=lambda a: a.timestamp,
    )
    next_item = inside[0].item_id if inside else None
    credited = [
        a for a in inside
        if a.item_id in top and (a.request_id is None or a.request_id == request_id)
    ]
    return HitOutcome(
        strict_hit=strict_hit(items, next_item, k),
        window_hit=bool(credited),
        clicked=any(a.event_type is EventType.CLICK for a in credited),
        converted=any(a.event_type is EventType.PURCHASE for a in credited),
        ndcg=ndcg(items, next_item),
    )
