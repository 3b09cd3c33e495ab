from __future__ import annotations

from schemas.events import EventContext, EventType, InteractionEvent
from streams.feature_worker.batch import PositionedEvent, entity_calls
from streams.features.keys import FeatureKeys, popularity_shard

KEYS = FeatureKeys("t:")


def _event(offset: int, user: str, item: str, category: str | None = None) -> PositionedEvent:
    event = InteractionEvent(
        event_id=f"e{offset}",
        user_id=user,
        session_id=f"{user}-s",
        item_id=item,
        event_type=EventType.VIEW,
        timestamp=1_700_000_000.0 + offset,
        context=EventContext(category=category) if category else None,
    )
    return PositionedEvent(0, offset, event)


def _offsets(lines: str) -> list[int]:
    return [int(line.split("\t")[1]) for line in lines.split("\n")]


def test_each_entity_gets_its_events_in_stream_order() -> None:
    batch = [_event(0, "u1", "i1", "c1"), _event(1, "u2", "i1"), _event(2, "u1", "i2", "c1")]
    calls = {call.key: call for call in entity_calls(KEYS, batch, max_events=100)}
    assert _offsets(calls[KEYS.user("u1")].lines) == [0, 2]
    assert _offsets(calls[KEYS.user("u2")].lines) == [1]
    assert _offsets(calls[KEYS.item("i1")].lines) == [0, 1]
    assert _offsets(calls[KEYS.category("c1")].lines) == [0, 2]
    assert calls[KEYS.session("u1-s")].kind == "s"


def test_events_without_a_category_touch_no_category() -> None:
    calls = entity_calls(KEYS, [_event(0, "u1", "i1")], max_events=100)
    assert sorted(call.kind for call in calls) == ["i", "p", "s", "u"]


def test_an_item_counts_in_its_own_popularity_shard() -> None:
    calls = entity_calls(KEYS, [_event(0, "u1", "i7")], max_events=100)
    shard = next(call for call in calls if call.kind == "p")
    assert shard.key == KEYS.popularity(popularity_shard("i7"))


def test_a_hot_entity_is_cut_into_calls_of_at_most_max_events_in_order() -> None:
    batch = [_event(n, f"u{n}", "hot") for n in range(7)]
    item_calls = [call for call in entity_calls(KEYS, batch, max_events=3) if call.kind == "i"]
    assert [_offsets(call.lines) for call in item_calls] == [[0, 1, 2], [3, 4, 5], [6]]
