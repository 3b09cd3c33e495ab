from __future__ import annotations

import time

from schemas.events import EventContext, EventType, InteractionEvent
from streams.feature_worker.batch import PositionedEvent
from streams.features.keys import FeatureKeys
from tests.feature_oracle import FeatureOracle

BASE = (time.time() // 86400 - 30) * 86400  # midnight UTC, 30 days ago


def _event(
    offset: int,
    ts: float,
    kind: EventType = EventType.VIEW,
    user: str = "u1",
    item: str = "i1",
    partition: int = 0,
) -> PositionedEvent:
    event = InteractionEvent(
        event_id=f"e{offset}",
        user_id=user,
        session_id=f"{user}-s",
        item_id=item,
        event_type=kind,
        timestamp=ts,
        context=EventContext(category="c1"),
    )
    return PositionedEvent(partition, offset, event)


def _oracle(*events: PositionedEvent) -> FeatureOracle:
    oracle = FeatureOracle(FeatureKeys("t:"))
    oracle.apply_all(events)
    return oracle


def test_lags_are_measured_from_strictly_earlier_events() -> None:
    oracle = _oracle(
        _event(0, BASE), _event(1, BASE + 10, EventType.PURCHASE), _event(2, BASE + 25)
    )
    user = oracle.hashes["t:u:{u1}"]
    assert user["prev_gap"] == "15.000"
    assert user["last_purchase_ts"] == repr(BASE + 10)
    session = oracle.hashes["t:s:{u1-s}"]
    assert (session["gap_sum"], session["gap_max"], session["n"]) == ("25.000", "15.000", "3")


def test_a_redelivered_position_changes_nothing() -> None:
    once = _oracle(_event(0, BASE), _event(1, BASE + 5))
    twice = _oracle(_event(0, BASE), _event(1, BASE + 5), _event(0, BASE), _event(1, BASE + 5))
    assert twice.snapshot() == once.snapshot()
    assert (twice.applied, twice.skipped) == (2, 2)


def test_buckets_that_fell_out_of_the_window_are_pruned_and_late_ones_dropped() -> None:
    oracle = _oracle(_event(0, BASE), _event(1, BASE + 3 * 3600), _event(2, BASE + 30))
    minutes = oracle.hashes["t:u:{u1}:m"]
    assert minutes == {str(int((BASE + 3 * 3600) // 60)): "1"}
    assert oracle.hashes["t:u:{u1}"]["n_view"] == "3"


def test_interleaving_partitions_differently_gives_the_same_item_state() -> None:
    a = [_event(i, BASE + 100 * i, user="u1", partition=0) for i in range(5)]
    b = [_event(i, BASE + 100 * i + 50, user="u2", partition=1) for i in range(5)]
    first = _oracle(*a, *b).snapshot()
    second = _oracle(*[e for pair in zip(b, a, strict=True) for e in pair]).snapshot()
    assert first == second
