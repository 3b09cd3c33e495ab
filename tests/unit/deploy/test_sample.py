from __future__ import annotations

import itertools
import time
from collections import Counter, defaultdict

from deploy.generators.sample import SampleConfig, SampleGenerator
from schemas import EventType, InteractionEvent, decode, encode

_FUNNEL = [EventType.VIEW, EventType.CLICK, EventType.ADD_TO_CART, EventType.PURCHASE]


def _events(n: int = 20_000, **config: int) -> list[InteractionEvent]:
    return list(SampleGenerator(SampleConfig(**config), start_ts=1.7e9).events(n))


def test_same_seed_gives_the_same_stream() -> None:
    assert _events(500) == _events(500)
    assert _events(500, seed=1) != _events(500, seed=2)


def test_events_are_valid_contracts_with_past_increasing_timestamps() -> None:
    events = list(SampleGenerator(SampleConfig()).events(5_000))
    assert all(decode(InteractionEvent, encode(e)) == e for e in events[:200])
    stamps = [e.timestamp for e in events]
    assert stamps == sorted(stamps)
    assert stamps[-1] <= time.time()


def test_funnel_steps_follow_each_other_on_the_same_item() -> None:
    events = _events()
    for prev, cur in itertools.pairwise(events):
        if cur.event_type is not EventType.VIEW:
            assert prev.item_id == cur.item_id
            assert prev.session_id == cur.session_id
            assert _FUNNEL.index(prev.event_type) == _FUNNEL.index(cur.event_type) - 1
    kinds = Counter(e.event_type for e in events)
    assert kinds[EventType.VIEW] > kinds[EventType.CLICK] > kinds[EventType.ADD_TO_CART]
    assert kinds[EventType.ADD_TO_CART] > kinds[EventType.PURCHASE] > 0


def test_popularity_is_skewed() -> None:
    views = Counter(e.item_id for e in _events() if e.event_type is EventType.VIEW)
    top = sum(count for _, count in views.most_common(len(views) // 10))
    assert top / sum(views.values()) > 0.35


def test_users_keep_stable_category_preferences() -> None:
    by_user: dict[str, Counter[str]] = defaultdict(Counter)
    for event in _events(users=200):
        assert event.context is not None and event.context.category is not None
        by_user[event.user_id][event.context.category] += 1
    shares = [
        sum(c for _, c in counts.most_common(3)) / sum(counts.values())
        for counts in by_user.values()
        if sum(counts.values()) >= 30
    ]
    assert sum(shares) / len(shares) > 0.7


def test_new_items_appear_only_later_in_the_stream() -> None:
    generator = SampleGenerator(SampleConfig(items=1_000, initial_catalog_share=0.5))
    events = list(generator.events(20_000))
    first_seen: dict[int, int] = {}
    for position, event in enumerate(events):
        first_seen.setdefault(int(event.item_id[1:]), position)
    late_items = [pos for item, pos in first_seen.items() if item >= 900]
    assert late_items
    assert min(late_items) > len(events) // 2
