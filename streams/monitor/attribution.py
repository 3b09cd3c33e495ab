"""Attribution join: which recommendation responses led to a later interaction.

A click, add-to-cart or purchase by the same user on one of a response's top-k items, within
`window_s` after `served_at`, is a hit for that response; a click also counts as a click-through
and a purchase as a conversion. When the event names its request (`context.request_id`) only that
response is credited; otherwise the most recent matching response is (last-touch attribution),
so one interaction never counts for two responses.

The join is symmetric because the two topics are consumed together but do not advance in
lockstep (after a restart the interactions may run ahead of the responses): an interaction that
matches nothing yet is kept while it is ahead of the watermark, for a response still to arrive.

Memory is bounded: a response leaves the join when its window closes (`expire`), or early, oldest
first, when more than `max_pending` are waiting; an unmatched interaction leaves once the
watermark passes it, or early beyond `max_pending` as well.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

from schemas.events import EventType, InteractionEvent
from schemas.recommendations import RecommendationResponse

_HIT_EVENTS = frozenset({EventType.CLICK, EventType.ADD_TO_CART, EventType.PURCHASE})


@dataclass(frozen=True)
class ResponseOutcome:
    """What became of one response once its attribution window closed."""

    model_version: str
    served_at: float
    hit: bool
    clicked: bool
    converted: bool
    feature_freshness_s: float | None = None
    model_freshness_s: float | None = None
    experiment: str | None = None
    arm: str | None = None


@dataclass(eq=False)  # identity: two waiting responses are never the same one
class _Pending:
    request_id: str
    user_id: str
    model_version: str
    served_at: float
    expires_at: float
    items: frozenset[str]
    feature_freshness_s: float | None
    model_freshness_s: float | None
    experiment: str | None = None
    arm: str | None = None
    hit: bool = False
    clicked: bool = False
    converted: bool = False

    def outcome(self) -> ResponseOutcome:
        return ResponseOutcome(
            self.model_version, self.served_at, self.hit, self.clicked, self.converted,
            self.feature_freshness_s, self.model_freshness_s, self.experiment, self.arm,
        )


def version_label(response: RecommendationResponse) -> str:
    """The model version a KPI is charged to; unversioned fallbacks get their strategy's name."""
    return response.model_version or f"unversioned-{response.strategy}"


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


@dataclass(eq=False)
class _Unmatched:
    user_id: str
    item_id: str
    timestamp: float
    event_type: EventType
    request_id: str | None
    used: bool = False


@dataclass
class AttributionJoin:
    window_s: float
    k: int
    max_pending: int
    evicted_early: int = 0
    _by_user: dict[str, list[_Pending]] = field(default_factory=dict)
    _by_request: dict[str, _Pending] = field(default_factory=dict)
    _expiry: list[tuple[float, int, _Pending]] = field(default_factory=list)
    _sequence: itertools.count[int] = field(default_factory=itertools.count)
    _unmatched_by_user: dict[str, list[_Unmatched]] = field(default_factory=dict)
    _unmatched: list[tuple[float, int, _Unmatched]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self._by_request)

    @property
    def oldest_unmatched_at(self) -> float | None:
        return self._unmatched[0][0] if self._unmatched else None

    @property
    def unmatched_interactions(self) -> int:
        return len(self._unmatched)

    @property
    def oldest_served_at(self) -> float | None:
        # Every response waits exactly window_s, so the next to expire is the oldest served.
        return self._expiry[0][2].served_at if self._expiry else None

    def add_response(self, response: RecommendationResponse) -> bool:
        """Start waiting for interactions; False for answers that cannot be attributed
        (errors, empty lists) and for re-deliveries of a response already waiting."""
        if response.status != "ok" or not response.items:
            return False
        if response.request_id in self._by_request:
            return False
        pending = _Pending(
            request_id=response.request_id,
            user_id=response.user_id,
            model_version=version_label(response),
            served_at=response.served_at,
            expires_at=response.served_at + self.window_s,
            items=frozenset(item.item_id for item in response.items[: self.k]),
            feature_freshness_s=_seconds(response.feature_freshness_ms),
            model_freshness_s=_seconds(response.model_freshness_ms),
            experiment=response.experiment,
            arm=response.arm,
        )
        self._by_request[pending.request_id] = pending
        self._by_user.setdefault(pending.user_id, []).append(pending)
        heapq.heappush(self._expiry, (pending.expires_at, next(self._sequence), pending))
        self._credit_earlier_interactions(pending)
        return True

    def _credit_earlier_interactions(self, pending: _Pending) -> None:
        for seen in self._unmatched_by_user.get(pending.user_id, ()):
            if (
                not seen.used
                and seen.item_id in pending.items
                and pending.served_at <= seen.timestamp <= pending.expires_at
                and seen.request_id in (None, pending.request_id)
            ):
                seen.used = True
                self._credit(pending, seen.event_type)

    def add_interaction(self, event: InteractionEvent, watermark: float) -> bool:
        """Credit the response this interaction is attributed to; False when none matches yet
        (it is then kept for a later response while it is ahead of `watermark`)."""
        if event.event_type not in _HIT_EVENTS:
            return False
        target = self._attributed(event)
        if target is not None:
            self._credit(target, event.event_type)
            return True
        if event.timestamp >= watermark:
            seen = _Unmatched(
                event.user_id, event.item_id, event.timestamp, event.event_type,
                event.context.request_id if event.context else None,
            )
            self._unmatched_by_user.setdefault(seen.user_id, []).append(seen)
            heapq.heappush(self._unmatched, (seen.timestamp, next(self._sequence), seen))
        return False

    @staticmethod
    def _credit(target: _Pending, event_type: EventType) -> None:
        target.hit = True
        target.clicked |= event_type is EventType.CLICK
        target.converted |= event_type is EventType.PURCHASE

    def _attributed(self, event: InteractionEvent) -> _Pending | None:
        def matches(p: _Pending) -> bool:
            return (
                p.user_id == event.user_id
                and event.item_id in p.items
                and p.served_at <= event.timestamp <= p.expires_at
            )

        request_id = event.context.request_id if event.context else None
        if request_id is not None and request_id in self._by_request:
            named = self._by_request[request_id]
            return named if matches(named) else None
        candidates = [p for p in self._by_user.get(event.user_id, ()) if matches(p)]
        return max(candidates, key=lambda p: p.served_at) if candidates else None

    def expire(self, watermark: float) -> list[ResponseOutcome]:
        """Finalise every response whose window closed before `watermark` (oldest first), and
        the oldest ones beyond `max_pending`."""
        outcomes: list[ResponseOutcome] = []
        while self._expiry and (
            self._expiry[0][0] < watermark or len(self._expiry) > self.max_pending
        ):
            expires_at, _, pending = heapq.heappop(self._expiry)
            if expires_at >= watermark:
                self.evicted_early += 1
            self._forget(pending)
            outcomes.append(pending.outcome())
        self._expire_unmatched(watermark)
        return outcomes

    def _expire_unmatched(self, watermark: float) -> None:
        # Responses still to come are served after the watermark, so earlier clicks cannot match.
        while self._unmatched and (
            self._unmatched[0][0] < watermark or len(self._unmatched) > self.max_pending
        ):
            _, _, seen = heapq.heappop(self._unmatched)
            waiting = self._unmatched_by_user[seen.user_id]
            waiting.remove(seen)
            if not waiting:
                del self._unmatched_by_user[seen.user_id]

    def _forget(self, pending: _Pending) -> None:
        del self._by_request[pending.request_id]
        waiting = self._by_user[pending.user_id]
        waiting.remove(pending)
        if not waiting:
            del self._by_user[pending.user_id]
