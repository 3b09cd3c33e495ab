"""The history a version reads for a query is the sequence its trainer built from the same
events: online (stream order) and in a full retrain (time order)."""

from __future__ import annotations

import random

from models.query_history import query_history
from models.session_config import SessionTransformerConfig
from online_trainer.online_model import Interaction, OnlineModel
from online_trainer.retrain import split_recent
from online_trainer.vocabulary import IdVocabulary

ROWS = {"a": 1, "b": 2, "c": 3}


def test_events_are_read_in_time_order_by_whole_seconds_ties_as_they_came() -> None:
    events = [("b", 20.2), ("a", 10.0), ("c", 20.9), ("c", 15.5)]
    assert query_history(events, ROWS, 10) == [(1, 10), (3, 15), (2, 20), (3, 20)]


def test_unknown_items_and_repeats_of_the_previous_item_are_no_history() -> None:
    events = [("a", 1.0), ("new", 2.0), ("a", 3.0), ("b", 4.0), ("b", 5.0), ("a", 6.0)]
    assert query_history(events, ROWS, 10) == [(1, 1), (2, 4), (1, 6)]
    assert query_history(events, ROWS, 2) == [(2, 4), (1, 6)]
    assert query_history([("new", 1.0)], ROWS, 10) == []


def stream(seed: int, users: int = 30, events: int = 900) -> list[Interaction]:
    """Events with repeats and one-off items, each user's in time order."""
    rng = random.Random(seed)
    clock = {f"u{n}": 1_700_000_000 for n in range(users)}
    out = []
    for _ in range(events):
        user = rng.choice(sorted(clock))
        clock[user] += rng.choice([0, 1, 30, 4000])
        item = f"i{rng.randrange(40)}" if rng.random() < 0.9 else f"once{rng.random()}"
        out.append(Interaction(user, item, clock[user]))
        if rng.random() < 0.3:  # a click of the item just viewed
            out.append(Interaction(user, item, clock[user]))
    return out


def test_the_online_trainers_histories_are_the_query_histories_of_its_id_map() -> None:
    config = SessionTransformerConfig(dim=8, heads=1, layers=1, max_len=20)
    model = OnlineModel(config)
    events = stream(seed=1)
    for start in range(0, len(events), 64):
        model.learn(events[start : start + 64], steps=0)
    rows = model.items.mapping()
    for user in {e.user for e in events}:
        items, times = model.histories.get(user)
        mine = [(e.item, e.timestamp) for e in events if e.user == user]
        assert query_history(mine, rows, config.max_len) == list(
            zip(items.tolist(), times.tolist(), strict=True)
        )


def test_a_full_retrains_sequences_are_the_query_histories_of_its_id_map() -> None:
    events = stream(seed=2)
    random.Random(3).shuffle(events)  # the window replayed out of stream order
    items = IdVocabulary()
    _, _, sequences = split_recent(events, items)
    rows = items.mapping()
    for user, (seq, ts) in sequences.items():
        mine = [(e.item, e.timestamp) for e in events if e.user == user]
        assert query_history(mine, rows, 10_000) == list(zip(seq, ts, strict=True))
