"""Labelling the ranker's logged features: `rec.features` + later interactions -> examples.

A logged answer (ServedFeatures) waits for its attribution window, like a response in the
attribution join (streams.monitor.attribution), and is then published as a RankerExample of all
its logged candidates: each graded by the strongest act the user took on it within the window
(purchase 3, add-to-cart 2, click 1), and 0 when the user did not act on it.

Unshown candidates are labelled too. A published ranker re-orders all the logged candidates and
chooses which of them are shown. A gate that judged only the shown ones would measure the order
within a list that retrieval chose. It would say nothing of the ranker's choice, and a ranker
could pass it while showing worse lists. A user's act on a candidate the answer did not show is
evidence found without the answer's help, so it counts as much as an act on a shown one.

Attribution: an interaction naming its request labels that answer only. Otherwise it labels the
most recent answer within the window that showed the item, or, when none showed it, the most
recent one that logged it. Interactions may run ahead of the logged features (separate topics):
a hit that matches nothing yet is kept while it is ahead of the watermark. Memory is bounded by
`max_pending` on both sides, oldest out first.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

from schemas.events import EventType, InteractionEvent
from schemas.ranker_examples import RankerExample, ServedFeatures

GRADES = {EventType.CLICK: 1, EventType.ADD_TO_CART: 2, EventType.PURCHASE: 3}


@dataclass(eq=False)
class _Hit:
    user_id: str
    item_id: str
    timestamp: float
    grade: int
    request_id: str | None


@dataclass(eq=False)  # identity: two waiting answers are never the same one
class _Waiting:
    record: ServedFeatures
    expires_at: float
    shown: frozenset[str]
    logged: frozenset[str]
    grades: dict[str, int] = field(default_factory=dict)

    def covers(self, item_id: str, timestamp: float) -> bool:
        return item_id in self.logged and self.record.served_at <= timestamp <= self.expires_at

    def credit(self, item_id: str, grade: int) -> None:
        self.grades[item_id] = max(grade, self.grades.get(item_id, 0))

    def example(self) -> RankerExample:
        """Every logged candidate with its grade; the vectors travel as they were logged."""
        items = self.record.candidates
        return RankerExample(
            request_id=self.record.request_id,
            user_id=self.record.user_id,
            served_at=self.record.served_at,
            features_at=self.record.features_at,
            model_version=self.record.model_version,
            ranker_version=self.record.ranker_version,
            feature_set=self.record.feature_set,
            n_features=self.record.n_features,
            candidates=items,
            vectors=self.record.vectors,
            grades=[self.grades.get(i, 0) for i in items],
            labelled_at=self.expires_at,  # event time: a replay labels the same way
        )


@dataclass
class ExampleLabeller:
    window_s: float
    max_pending: int
    evicted_early: int = 0
    _by_request: dict[str, _Waiting] = field(default_factory=dict)
    _by_user: dict[str, list[_Waiting]] = field(default_factory=dict)
    _expiry: list[tuple[float, int, _Waiting]] = field(default_factory=list)
    _hits_by_user: dict[str, list[_Hit]] = field(default_factory=dict)
    _hits: list[tuple[float, int, _Hit]] = field(default_factory=list)
    _sequence: itertools.count[int] = field(default_factory=itertools.count)

    def __len__(self) -> int:
        return len(self._by_request)

    @property
    def oldest_served_at(self) -> float | None:
        return self._expiry[0][2].record.served_at if self._expiry else None

    @property
    def oldest_hit_at(self) -> float | None:
        return self._hits[0][0] if self._hits else None

    def add_features(self, record: ServedFeatures) -> bool:
        """Start waiting for labels; False for a re-delivery of an answer already waiting.
        The record's vectors must have been checked (`record.matrix()`) by the caller."""
        if record.request_id in self._by_request:
            return False
        waiting = _Waiting(
            record, record.served_at + self.window_s, frozenset(record.shown),
            frozenset(record.candidates),
        )
        self._by_request[record.request_id] = waiting
        self._by_user.setdefault(record.user_id, []).append(waiting)
        heapq.heappush(self._expiry, (waiting.expires_at, next(self._sequence), waiting))
        for hit in self._hits_by_user.get(record.user_id, ()):
            if hit.request_id in (None, record.request_id) and waiting.covers(
                hit.item_id, hit.timestamp
            ):
                waiting.credit(hit.item_id, hit.grade)
        return True

    def add_interaction(self, event: InteractionEvent, watermark: float) -> bool:
        """Grade the answer this interaction is attributed to; False when none matches yet."""
        grade = GRADES.get(event.event_type)
        if grade is None:
            return False
        request_id = event.context.request_id if event.context else None
        target = self._attributed(event, request_id)
        if target is not None:
            target.credit(event.item_id, grade)
            return True
        if event.timestamp >= watermark:
            hit = _Hit(event.user_id, event.item_id, event.timestamp, grade, request_id)
            self._hits_by_user.setdefault(hit.user_id, []).append(hit)
            heapq.heappush(self._hits, (hit.timestamp, next(self._sequence), hit))
        return False

    def _attributed(self, event: InteractionEvent, request_id: str | None) -> _Waiting | None:
        item, at = event.item_id, event.timestamp
        if request_id is not None and request_id in self._by_request:
            named = self._by_request[request_id]
            mine = named.record.user_id == event.user_id and named.covers(item, at)
            return named if mine else None
        matching = [w for w in self._by_user.get(event.user_id, ()) if w.covers(item, at)]
        showed = [w for w in matching if item in w.shown]
        return max(showed or matching, key=lambda w: w.record.served_at) if matching else None

    def expire(self, watermark: float) -> list[RankerExample]:
        """Examples of every answer whose window closed before `watermark` (oldest first), and
        of the oldest beyond `max_pending`."""
        examples = []
        while self._expiry and (
            self._expiry[0][0] < watermark or len(self._expiry) > self.max_pending
        ):
            expires_at, _, waiting = heapq.heappop(self._expiry)
            if expires_at >= watermark:
                self.evicted_early += 1
            self._forget(waiting)
            examples.append(waiting.example())
        while self._hits and (self._hits[0][0] < watermark or len(self._hits) > self.max_pending):
            _, _, hit = heapq.heappop(self._hits)
            waiting_hits = self._hits_by_user[hit.user_id]
            waiting_hits.remove(hit)
            if not waiting_hits:
                del self._hits_by_user[hit.user_id]
        return examples

    def _forget(self, waiting: _Waiting) -> None:
        del self._by_request[waiting.record.request_id]
        answers = self._by_user[waiting.record.user_id]
        answers.remove(waiting)
        if not answers:
            del self._by_user[waiting.record.user_id]
