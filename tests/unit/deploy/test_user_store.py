from __future__ import annotations

import time

import pytest

from deploy.demo import traffic
from deploy.demo.user_store import wait_until_held
from schemas import EventType, InteractionEvent


class Store:
    """Holds a user's event after `applied_after` polls (a pipeline that is behind)."""

    def __init__(self, applied_after: int) -> None:
        self.polls = 0
        self.applied_after = applied_after

    def holds(self, user_id: str, timestamp: float) -> bool:
        self.polls += 1
        return self.polls > self.applied_after


def test_a_request_waits_until_the_store_holds_the_users_event_and_traffic_goes_on() -> None:
    store, released = Store(applied_after=3), []
    assert wait_until_held(store, "u", 1.0, 5.0, lambda: released.append(1))
    assert store.polls == 4 and len(released) == 3


def test_a_store_that_never_catches_up_lets_the_request_go_after_the_wait() -> None:
    store = Store(applied_after=10**9)
    assert not wait_until_held(store, "u", 1.0, 0.05, lambda: None)
    assert store.polls >= 2


class Producer:
    def __init__(self, kafka: object) -> None:
        self.sent: list[InteractionEvent] = []

    def send(self, topic: str, key: str, value: InteractionEvent) -> None:
        self.sent.append(value)

    def poll(self, timeout: float) -> None:
        return None


class Kafka:
    def topic(self, name: str) -> str:
        return name


class Applied:
    """A store that holds every event up to `newest` (the feature worker's `last_ts`)."""

    def __init__(self, newest: float) -> None:
        self.newest = newest
        self.asked: list[float] = []

    def holds(self, user_id: str, timestamp: float) -> bool:
        self.asked.append(timestamp)
        return self.newest >= timestamp


def _event(n: int, ts: float) -> InteractionEvent:
    return InteractionEvent(event_id=f"r{n}", user_id="u", session_id="u-s1", item_id=str(n),
                            event_type=EventType.CLICK, timestamp=ts)


def test_a_request_waits_for_the_users_event_still_queued_when_its_turn_comes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(traffic, "EventProducer", Producer)
    live = traffic.Traffic(Kafka(), None, 0.0, 0.02, 1)  # type: ignore[arg-type]
    live.offer(_event(1, 1e9), time.time())
    time.sleep(0.03)
    live.release(time.time())
    stored = live.stats.published[-1].timestamp
    live.offer(_event(2, 1e9 + 1), time.time())
    time.sleep(0.03)
    # The user's next request is due; their event is due too but still queued (the loop came
    # back late): the request waits for that event, not for the one the store already holds.
    assert len(live.stats.published) == 1
    store = Applied(newest=stored)
    live.await_stored("u", store, 0.05)
    assert len(live.stats.published) == 2
    assert store.asked[0] == live.stats.published[-1].timestamp > stored
    assert live.stats.unstored == 1
