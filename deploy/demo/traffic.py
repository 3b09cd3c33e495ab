"""The live side of the demo: ML-100K events as users acting now, each preceded (for a share of
events) by a recommendation request, and the drift that shifts what users pick.

Time is accelerated: events leave in the dataset's order at a configured rate, stamped with the
wall clock, so months of history pass in minutes and every service sees live event times.

The drift (`ItemRemap`): from the shift on, a share of the catalogue's item ids is permuted among
itself: a user who would have picked item A now picks item pi(A). Popularity, co-occurrence and
the users' tastes move to other ids at once, so the model's learned item embeddings point at the
wrong items until it relearns them; the catalogue itself is unchanged.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from deploy.demo.observer import Observer
from deploy.demo.user_store import UserStore, wait_until_held
from schemas import EventContext, InteractionEvent, RecommendationRequest
from schemas.hits import strict_hit
from schemas.topics import INTERACTIONS, REC_REQUESTS
from streams.kafka.connection import KafkaConnection
from streams.kafka.producer import EventProducer

_K = 10


class ItemRemap:
    def __init__(self, items: Iterable[str], share: float, seed: int) -> None:
        rng = random.Random(seed)
        ids = sorted(set(items))
        chosen = rng.sample(ids, round(share * len(ids)))
        shuffled = chosen[:]
        rng.shuffle(shuffled)
        self.mapping = dict(zip(chosen, shuffled, strict=True))

    def __call__(self, item: str) -> str:
        return self.mapping.get(item, item)


LIVE_PREFIX = "live-"


def live_event(event: InteractionEvent) -> InteractionEvent:
    """A replayed event as the live phase sends it: its event id and session id in a namespace
    of their own. Both come from deploy.generators.dataset_replay.frame_events numbering, which
    starts again for the live half: a live session named like a backfill one (`{user}-s1`)
    would read that old session's sequence from the feature store (the scorer then filters its
    items as seen), and the live phase starts long after the backfill's newest event, so each
    of its sessions is a new one."""
    return event.model_copy(update={
        "event_id": f"{LIVE_PREFIX}{event.event_id}",
        "session_id": f"{LIVE_PREFIX}{event.session_id}",
    })


@dataclass
class _Pending:
    due: float
    event: InteractionEvent
    request_id: str | None
    sent_at: float


@dataclass(frozen=True)
class Served:
    """One answer read in time and the interaction its request preceded: what the arms'
    figures and a bench judge afterwards."""

    request_id: str
    sent_at: float
    user_id: str
    arm: str | None
    strategy: str
    items: tuple[str, ...]
    next_item: str


@dataclass(frozen=True)
class Published:
    """One live interaction as it left: who, what, when, and the answer it names (if any)."""

    user_id: str
    item_id: str
    timestamp: float
    request_id: str | None


@dataclass
class TrafficStats:
    events: int = 0
    requests: int = 0
    answered: int = 0
    late: int = 0
    unstored: int = 0
    """User-paced requests that left before the store held the user's previous event (it
    did not within the wait)."""
    client_hits: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    feature_freshness_ms: list[float] = field(default_factory=list)
    versions: dict[str, int] = field(default_factory=dict)
    served: list[Served] = field(default_factory=list)
    published: list[Published] = field(default_factory=list)


class Traffic:
    """Sends requests at an event's slot and the event `lead_s` later, crediting the request
    (context.request_id) when the user picked one of the recommended items."""

    def __init__(
        self, kafka: KafkaConnection, observer: Observer, request_share: float, lead_s: float,
        seed: int,
    ) -> None:
        self._producer = EventProducer(kafka)
        self._events_topic = kafka.topic(INTERACTIONS)
        self._requests_topic = kafka.topic(REC_REQUESTS)
        self._observer = observer
        self._share = request_share
        self._lead_s = lead_s
        self._rng = random.Random(seed)
        self._queue: deque[_Pending] = deque()
        self.stats = TrafficStats()
        self.remap: ItemRemap | None = None
        self._last_published: dict[str, float] = {}

    def offer(self, event: InteractionEvent, now: float) -> None:
        event = live_event(event)
        if self.remap is not None:
            event = event.model_copy(update={"item_id": self.remap(event.item_id)})
        request_id = None
        if self._rng.random() < self._share:
            request_id = self.request(event.user_id, event.session_id, now)
        self._queue.append(_Pending(now + self._lead_s, event, request_id, now))
        self.release(now)

    def request(self, user_id: str, session_id: str | None, now: float) -> str:
        request_id = uuid.uuid4().hex
        record = RecommendationRequest(
            request_id=request_id, user_id=user_id, session_id=session_id, k=_K, sent_at=now
        )
        self._producer.send(self._requests_topic, user_id, record)
        self.stats.requests += 1
        return request_id

    def release(self, now: float) -> None:
        """Publishes every event whose lead time has passed."""
        while self._queue and self._queue[0].due <= now:
            self._publish(self._queue.popleft(), time.time())
        self._producer.poll(0.0)

    def await_stored(self, user_id: str, store: UserStore, timeout_s: float) -> None:
        """Holds the user's next request until the store holds their previous event, releasing
        other users' due events meanwhile; past `timeout_s` it leaves anyway, counted. The
        previous event may still be queued (the loop ran late): it is released first, and
        that is the event waited for."""
        self.release(time.time())
        published = self._last_published.get(user_id)
        if published is None:
            return
        if not wait_until_held(store, user_id, published, timeout_s,
                               lambda: self.release(time.time())):
            self.stats.unstored += 1

    def drain(self) -> None:
        while self._queue:
            self._publish(self._queue.popleft(), time.time())
        self._producer.flush()

    def _publish(self, pending: _Pending, now: float) -> None:
        event = pending.event.model_copy(update={"timestamp": now})
        named = None
        if pending.request_id is not None and self._credited(pending):
            named = pending.request_id
            context = EventContext(source="recommendation", request_id=named)
            event = event.model_copy(update={"context": context})
        self._producer.send(self._events_topic, event.user_id, event)
        self.stats.events += 1
        self._last_published[event.user_id] = now
        self.stats.published.append(Published(event.user_id, event.item_id, now, named))

    def _credited(self, pending: _Pending) -> bool:
        assert pending.request_id is not None
        answer = self._observer.take(pending.request_id)
        if answer is None:
            self.stats.late += 1
            return False
        response, s = answer.response, self.stats
        s.answered += 1
        s.latencies_ms.append((answer.received_at - pending.sent_at) * 1000.0)
        if response.feature_freshness_ms is not None:
            s.feature_freshness_ms.append(response.feature_freshness_ms)
        version = response.model_version or f"unversioned-{response.strategy}"
        s.versions[version] = s.versions.get(version, 0) + 1
        # The event is this user's next act after the answer: a strict hit by the one
        # definition the monitor and the benches use.
        hit = strict_hit([i.item_id for i in response.items], pending.event.item_id, k=_K)
        s.client_hits += hit
        s.served.append(Served(pending.request_id, pending.sent_at, response.user_id,
                               response.arm, response.strategy,
                               tuple(i.item_id for i in response.items), pending.event.item_id))
        return hit

    def close(self) -> None:
        self._producer.flush()
