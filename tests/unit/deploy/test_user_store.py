from __future__ import annotations

from deploy.demo.user_store import wait_until_held


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
