from __future__ import annotations

from collections.abc import Iterable

from schemas.events import EventContext, EventType, InteractionEvent
from streams.feature_worker.batch import PositionedEvent
from streams.feature_worker.fold import EntityUpdate, entity_updates
from streams.features.keys import FeatureKeys, popularity_shard

KEYS = FeatureKeys("t:")


def _event(
    offset: int, user: str, item: str, category: str | None = None, partition: int = 0
) -> PositionedEvent:
    event = InteractionEvent(
        event_id=f"e{offset}",
        user_id=user,
        session_id=f"{user}-s",
        item_id=item,
        event_type=EventType.VIEW,
        timestamp=1_700_000_000.0 + offset,
        context=EventContext(category=category) if category else None,
    )
    return PositionedEvent(partition, offset, event)


def _by_key(updates: Iterable[EntityUpdate]) -> dict[str, list[EntityUpdate]]:
    found: dict[str, list[EntityUpdate]] = {}
    for update in updates:
        found.setdefault(update.key, []).append(update)
    return found


def _offsets(update: EntityUpdate) -> list[int]:
    return [item.offset for item in update.events]


def test_each_entity_gets_one_update_with_its_events_in_stream_order() -> None:
    batch = [_event(0, "u1", "i1", "c1"), _event(1, "u2", "i1"), _event(2, "u1", "i2", "c1")]
    found = _by_key(entity_updates(KEYS, batch, max_events=100))
    assert [_offsets(u) for u in found[KEYS.user("u1")]] == [[0, 2]]
    assert [_offsets(u) for u in found[KEYS.item("i1")]] == [[0, 1]]
    assert [_offsets(u) for u in found[KEYS.category("c1")]] == [[0, 2]]
    assert found[KEYS.session("u1-s")][0].kind == "s"


def test_an_update_names_each_partition_with_its_first_and_last_offset() -> None:
    batch = [_event(4, "u1", "i1", partition=0), _event(9, "u2", "i1", partition=2),
             _event(7, "u3", "i1", partition=0)]
    (item,) = _by_key(entity_updates(KEYS, batch, max_events=100))[KEYS.item("i1")]
    # Two partitions: (applied field, first, last, expected applied offset) each, then counters.
    assert item.values[0] == [("_p0", 4, 7, -1), ("_p2", 9, 9, -1)]
    assert item.values[1] == ["n_view", 3]


def test_a_users_counters_and_affinities_are_folded_into_deltas() -> None:
    batch = [_event(0, "u1", "i1", "c1"), _event(1, "u1", "i2", "c1"), _event(2, "u1", "i3")]
    (user,) = _by_key(entity_updates(KEYS, batch, max_events=100))[KEYS.user("u1")]
    assert user.values[1] == ["n_view", 3, "aff:c1", 2]


def test_events_without_a_category_touch_no_category() -> None:
    updates = entity_updates(KEYS, [_event(0, "u1", "i1")], max_events=100)
    assert sorted(u.kind for u in updates) == ["i", "p", "s", "u"]


def test_an_item_counts_in_its_own_popularity_shard() -> None:
    updates = entity_updates(KEYS, [_event(0, "u1", "i7")], max_events=100)
    shard = next(u for u in updates if u.kind == "p")
    assert shard.key == KEYS.popularity(popularity_shard("i7"))


def test_popularity_is_counted_in_buckets_of_the_configured_width() -> None:
    minute = (1_700_000_000 // 60, 1_700_000_090 // 60)
    one = entity_updates(KEYS, [_event(0, "u1", "i7")], max_events=100, popularity_bucket_s=60)
    single = next(u for u in one if u.kind == "p")
    assert single.values[-2:] == (minute[0], [minute[0], "i7", 1])
    both = [_event(0, "u1", "i7"), _event(90, "u2", "i7")]
    folded = next(
        u for u in entity_updates(KEYS, both, max_events=100, popularity_bucket_s=60)
        if u.kind == "p"
    )
    assert folded.values[-2:] == (minute[1], [minute[0], "i7", 1, minute[1], "i7", 1])
    hourly = next(u for u in entity_updates(KEYS, both, max_events=100) if u.kind == "p")
    assert hourly.values[-2:] == (1_700_000_090 // 3600, [1_700_000_000 // 3600, "i7", 2])


def test_a_hot_entity_is_cut_into_pieces_each_expecting_where_the_last_ended() -> None:
    batch = [_event(n, f"u{n}", "hot") for n in range(7)]
    pieces = _by_key(entity_updates(KEYS, batch, max_events=3))[KEYS.item("hot")]
    assert [_offsets(u) for u in pieces] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [u.values[0][0][3] for u in pieces] == [-1, 2, 5]  # type: ignore[index]


def test_offsets_going_back_within_a_batch_give_one_update_per_event() -> None:
    batch = [_event(5, "u1", "i1"), _event(6, "u1", "i2"), _event(5, "u1", "i1")]
    users = _by_key(entity_updates(KEYS, batch, max_events=100))[KEYS.user("u1")]
    assert [_offsets(u) for u in users] == [[5], [6], [5]]


def test_only_the_entities_whose_offsets_go_back_get_one_update_per_event() -> None:
    batch = [_event(5, "u1", "i1"), _event(6, "u1", "i2"), _event(5, "u1", "i1"),
             _event(0, "u2", "i3", partition=1), _event(1, "u2", "i3", partition=1)]
    found = _by_key(entity_updates(KEYS, batch, max_events=100))
    assert [_offsets(u) for u in found[KEYS.user("u1")]] == [[5], [6], [5]]
    assert [_offsets(u) for u in found[KEYS.user("u2")]] == [[0, 1]]
    assert [_offsets(u) for u in found[KEYS.item("i3")]] == [[0, 1]]
