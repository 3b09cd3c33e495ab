"""The monitor's one windowed join: each answer with the acts its user took within the
attribution window after it.

An answer is what the scorer logged for one request: its response (`rec.responses`: the items it
showed, for the KPIs) and, when the ranker's features were logged, its `ServedFeatures`
(`rec.features`: every candidate with its vector, for the ranker's examples). Either may arrive
first. An act is a click, add-to-cart or purchase (schemas/hits.py); the join keeps the acts of
users with an answer open, and acts ahead of the watermark for answers still to arrive (the
topics do not advance in lockstep: after a restart the interactions may run ahead).

When the watermark passes an answer's window (served_at + window_s), the answer closes with the
acts of its user inside the window, and both projections are computed from that one result:
- the KPI outcome of its response: hit, click and conversion, by the monitor's hit
  (docs/architecture.md, "What a hit is"): the window hit of schemas/hits.py over the acts
  credited to this answer. An act naming its request is credited to that answer only; an act
  naming none to the user's most recent open answer that showed its item in the top k (last
  touch), so one act never counts for two answers;
- the ranker example of its logged features: every logged candidate graded by the strongest act
  attributed to this answer (purchase 3, add-to-cart 2, click 1, else 0). An act naming its
  request labels that answer only (as it counts for that answer's hits only); otherwise the
  most recent open answer of the user that logged the item, whether it showed it or not: the
  answer the user acted after. Preferring an older answer because it showed the item would
  label it with a later pick, and the labels would follow what each list showed, which
  retrieval chose: a ranker trained and gated on them learns to agree with retrieval. Unshown
  candidates are labelled too: a ranker chooses which candidates are shown, and a gate that
  judged only the shown ones would measure retrieval's choice, not the ranker's.

Nothing is credited when an act arrives, so adding a record twice changes nothing (a replay
after a restart is harmless) and a record's effect does not depend on the order of the topics.
Memory is bounded: beyond `max_pending` answers (or acts) the oldest leave early.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from schemas.events import EventType
from schemas.hits import ACTS, Act, judge
from schemas.kpi import user_bucket
from schemas.ranker_examples import RankerExample, ServedFeatures
from streams.monitor.inputs import Interaction, Response

GRADES = {EventType.CLICK: 1, EventType.ADD_TO_CART: 2, EventType.PURCHASE: 3}


def version_label(response: Response) -> str:
    """The model version a KPI is charged to; unversioned fallbacks get their strategy's name."""
    return response.model_version or f"unversioned-{response.strategy}"


@dataclass(frozen=True)
class ResponseOutcome:
    """What became of one response once its attribution window closed."""

    model_version: str
    served_at: float
    hit: bool
    clicked: bool
    converted: bool
    experiment: str | None = None
    arm: str | None = None
    feature_freshness_s: float | None = None
    model_freshness_s: float | None = None
    user_bucket: int = 0
    """The answered user's bucket (schemas.kpi.user_bucket), which the KPI windows split by."""


@dataclass(eq=False)  # identity: two open answers are never the same one
class Answer:
    request_id: str
    user_id: str
    served_at: float
    expires_at: float
    partition: int = 0
    """The input partition of the user's records (the three topics are co-partitioned)."""
    response: Response | None = None
    features: ServedFeatures | None = None
    top: frozenset[str] = frozenset()
    """The response's top k items (what its KPI counts); empty until the response arrives."""
    listed: frozenset[str] = frozenset()
    """Every item the answer showed: the logged `shown` items, else the response's."""
    logged: frozenset[str] = frozenset()
    """The logged candidates; empty until the logged features arrive."""

    def covers(self, act: Acted) -> bool:
        return self.served_at <= act.timestamp <= self.expires_at


class Acted(NamedTuple):
    """One act the join keeps (a tuple: the join holds one per act of every open user)."""

    event_id: str
    user_id: str
    item_id: str
    timestamp: float
    event_type: EventType
    request_id: str | None
    """The answer the act names (`context.request_id`), if any."""
    partition: int = 0

    def act(self) -> Act:
        return Act(self.item_id, self.timestamp, self.event_type, self.request_id)


@dataclass(frozen=True)
class Closed:
    """One answer whose window closed, with its projections."""

    answer: Answer
    outcome: ResponseOutcome | None
    example: RankerExample | None


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


@dataclass
class AnswerJoin:
    window_s: float
    k: int
    max_pending: int
    evicted_early: int = 0
    _answers: dict[str, Answer] = field(default_factory=dict)
    _by_user: dict[str, list[Answer]] = field(default_factory=dict)
    _expiry: list[tuple[float, int, Answer]] = field(default_factory=list)
    _acts: dict[str, dict[str, Acted]] = field(default_factory=dict)
    _act_expiry: list[tuple[float, int, Acted]] = field(default_factory=list)
    _labels_for: dict[str, str] = field(default_factory=dict)
    """act (event id) -> the answer (request id) it labels, decided when the first answer that
    could claim it closes, while every rival is still open."""
    _credited_to: dict[str, str] = field(default_factory=dict)
    """act (event id) -> the answer (request id) whose KPI it counts for, decided likewise."""
    forgotten: list[Acted] = field(default_factory=list)
    """Acts dropped since the caller last cleared it (for the state table)."""
    _sequence: itertools.count[int] = field(default_factory=itertools.count)

    def __len__(self) -> int:
        return len(self._answers)

    @property
    def acts(self) -> int:
        return len(self._act_expiry)

    @property
    def oldest_served_at(self) -> float | None:
        # Every answer waits exactly window_s, so the next to expire is the oldest served.
        return self._expiry[0][2].served_at if self._expiry else None

    def add_response(self, response: Response, partition: int = 0) -> bool:
        """False for answers that cannot be attributed (errors, empty lists) and for
        re-deliveries of a response already open."""
        if response.status != "ok" or not response.items:
            return False
        answer = self._answer(
            response.request_id, response.user_id, response.served_at, partition
        )
        if answer.response is not None:
            return False
        answer.response = response
        items = [i.item_id for i in response.items]
        answer.top = frozenset(items[: self.k])
        if answer.features is None:
            answer.listed = frozenset(items)
        return True

    def add_features(self, record: ServedFeatures, partition: int = 0) -> bool:
        """False for a re-delivery. The record's vectors must have been checked
        (`record.matrix()`) by the caller."""
        answer = self._answer(record.request_id, record.user_id, record.served_at, partition)
        if answer.features is not None:
            return False
        answer.features = record
        answer.listed = frozenset(record.shown)
        answer.logged = frozenset(record.candidates)
        return True

    def _answer(self, request_id: str, user_id: str, served_at: float, partition: int) -> Answer:
        known = self._answers.get(request_id)
        if known is not None:
            return known
        answer = Answer(request_id, user_id, served_at, served_at + self.window_s, partition)
        self._answers[request_id] = answer
        self._by_user.setdefault(user_id, []).append(answer)
        heapq.heappush(self._expiry, (answer.expires_at, next(self._sequence), answer))
        return answer

    def add_interaction(
        self, event: Interaction, watermark: float, partition: int = 0
    ) -> bool:
        """Keep an act for the answers it may count for: open ones, or (ahead of the
        watermark) ones still to arrive. False when it is kept for none (or is no act, or a
        re-delivery)."""
        event_type = event.event_type
        if event_type not in ACTS:
            return False
        user, event_id, at = event.user_id, event.event_id, event.timestamp
        acts = self._acts.get(user)
        if acts is not None and event_id in acts:
            return False
        if at < watermark and not any(
            a.served_at <= at <= a.expires_at for a in self._by_user.get(user, ())
        ):
            return False
        context = event.context
        request_id = context.request_id if context is not None else None
        acted = Acted(event_id, user, event.item_id, at, event_type, request_id, partition)
        if acts is None:
            acts = self._acts[user] = {}
        acts[event_id] = acted
        heapq.heappush(self._act_expiry, (at + self.window_s, next(self._sequence), acted))
        return True

    def expire(self, watermark: float) -> list[Closed]:
        """Close every answer whose window ended before `watermark` (oldest first), and the
        oldest ones beyond `max_pending`; then forget the acts no answer can still count."""
        closed: list[Closed] = []
        while self._expiry and (
            self._expiry[0][0] < watermark or len(self._expiry) > self.max_pending
        ):
            expires_at, _, answer = heapq.heappop(self._expiry)
            if expires_at >= watermark:
                self.evicted_early += 1
            closed.append(self._close(answer))
            self._forget(answer)
        while self._act_expiry and (
            self._act_expiry[0][0] < watermark or len(self._act_expiry) > self.max_pending
        ):
            _, _, acted = heapq.heappop(self._act_expiry)
            acts = self._acts[acted.user_id]
            del acts[acted.event_id]
            self._labels_for.pop(acted.event_id, None)
            self._credited_to.pop(acted.event_id, None)
            self.forgotten.append(acted)
            if not acts:
                del self._acts[acted.user_id]
        return closed

    def _close(self, answer: Answer) -> Closed:
        acts = self._acts.get(answer.user_id)
        user_acts: Collection[Acted] = () if acts is None else acts.values()
        return Closed(answer, self._outcome(answer, user_acts), self._example(answer, user_acts))

    def _outcome(self, answer: Answer, acts: Collection[Acted]) -> ResponseOutcome | None:
        response = answer.response
        if response is None:
            return None
        hit = clicked = converted = False
        top, start, end = answer.top, answer.served_at, answer.expires_at
        credited = [
            a.act() for a in acts
            if a.item_id in top and start <= a.timestamp <= end and self._credits(answer, a)
        ]
        if credited:
            hits = judge([i.item_id for i in response.items], start, self.window_s, credited,
                         self.k, answer.request_id)
            hit, clicked, converted = hits.window_hit, hits.clicked, hits.converted
        return ResponseOutcome(
            version_label(response), answer.served_at, hit, clicked, converted,
            response.experiment, response.arm,
            _seconds(response.feature_freshness_ms), _seconds(response.model_freshness_ms),
            user_bucket(answer.user_id),
        )

    def _credits(self, answer: Answer, acted: Acted) -> bool:
        """Is `answer` the one whose KPI this act counts for (last touch among the user's open
        answers that showed its item in the top k, unless it names its request)?"""
        named = acted.request_id
        if named is not None:
            return named == answer.request_id
        chosen = self._credited_to.get(acted.event_id)
        if chosen is None:
            item, at = acted.item_id, acted.timestamp
            latest = answer
            for a in self._by_user.get(answer.user_id, ()):
                if a.served_at > latest.served_at and item in a.top and at <= a.expires_at \
                        and a.served_at <= at:
                    latest = a
            chosen = self._credited_to[acted.event_id] = latest.request_id
        return chosen == answer.request_id

    def _example(self, answer: Answer, acts: Collection[Acted]) -> RankerExample | None:
        record = answer.features
        if record is None:
            return None
        grades: dict[str, int] = {}
        logged, start, end = answer.logged, answer.served_at, answer.expires_at
        for acted in acts:
            item = acted.item_id
            if item in logged and start <= acted.timestamp <= end \
                    and self._labels(answer, acted):
                grades[item] = max(GRADES[acted.event_type], grades.get(item, 0))
        return RankerExample(
            request_id=record.request_id,
            user_id=record.user_id,
            served_at=record.served_at,
            features_at=record.features_at,
            model_version=record.model_version,
            ranker_version=record.ranker_version,
            feature_set=record.feature_set,
            n_features=record.n_features,
            candidates=record.candidates,
            vectors=record.vectors,  # as logged
            grades=[grades.get(i, 0) for i in record.candidates],
            labelled_at=answer.expires_at,  # event time: a replay labels the same way
        )

    def _labels(self, answer: Answer, acted: Acted) -> bool:
        """Is `answer` the one this act is attributed to, among the user's open answers?"""
        named = acted.request_id
        if named is not None:
            return named == answer.request_id
        chosen = self._labels_for.get(acted.event_id)
        if chosen is None:
            item = acted.item_id
            rivals = [
                a for a in self._by_user.get(answer.user_id, ())
                if item in a.logged and a.covers(acted)
            ]
            chosen = max(rivals, key=lambda a: a.served_at).request_id
            self._labels_for[acted.event_id] = chosen
        return chosen == answer.request_id

    def _forget(self, answer: Answer) -> None:
        del self._answers[answer.request_id]
        waiting = self._by_user[answer.user_id]
        waiting.remove(answer)
        if not waiting:
            del self._by_user[answer.user_id]

    def open_answers(self) -> Iterable[Answer]:
        return self._answers.values()
