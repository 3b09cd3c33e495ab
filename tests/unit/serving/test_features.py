from hypothesis import given
from hypothesis import strategies as st

from serving.experiment import Experiment
from serving.features import merge_popularity, parse_document, parse_sequence
from serving.rules import BusinessRules


def test_sequences_are_returned_oldest_first() -> None:
    events = parse_sequence([b"i3 30.5 click", b"i2 20.0 view", b"i1 10.0 purchase"])
    assert [(e.item_id, e.ts, e.kind) for e in events] == [
        ("i1", 10.0, "purchase"), ("i2", 20.0, "view"), ("i3", 30.5, "click")
    ]


def test_entries_without_a_type_or_time_read_as_views_at_time_zero() -> None:
    events = parse_sequence([b"i2 20.0", b"i1"])
    assert [tuple(e) for e in events] == [("i1", 0.0, "view"), ("i2", 20.0, "view")]


def test_recent_popularity_blends_in_half_of_the_previous_hour() -> None:
    merged = merge_popularity([(b"a", 3.0), (b"b", 2.0)], [(b"b", 4.0), (b"c", 1.0)])
    assert merged == [("b", 4.0), ("a", 3.0), ("c", 0.5)]
    assert all(type(item) is str for item, _ in merged)


def test_recent_popularity_reads_scores_as_the_reply_holds_them_and_keeps_the_first() -> None:
    merged = merge_popularity([(b"x", b"2"), (b"y", b"2")], [(b"z", b"6")], limit=2)
    assert merged == [("z", 3.0), ("x", 2.0)]  # equal counts: by id
    assert merge_popularity([("q", 1.0)], []) == [("q", 1.0)]
    assert merge_popularity([], []) == []


@given(
    st.lists(st.tuples(st.sampled_from(["a", "b", "é", "z1", "z", "ü"]), st.integers(0, 9)),
             max_size=12),
    st.lists(st.tuples(st.sampled_from(["a", "b", "é", "z1", "z", "ü"]), st.integers(0, 9)),
             max_size=12),
)
def test_recent_popularity_ranks_as_a_sort_of_the_blended_counts(
    current: list[tuple[str, int]], previous: list[tuple[str, int]]
) -> None:
    current = list(dict(current).items())  # one entry per item and hour, as a sorted set has
    previous = list(dict(previous).items())
    blended: dict[str, float] = {}
    for item, count in current:
        blended[item] = float(count)
    for item, count in previous:
        blended[item] = blended.get(item, 0.0) + 0.5 * count
    expected = sorted(blended.items(), key=lambda p: (-p[1], p[0]))
    as_bytes = [(i.encode(), str(c).encode()) for i, c in current]
    previous_bytes = [(i.encode(), str(c).encode()) for i, c in previous]
    assert merge_popularity(as_bytes, previous_bytes) == expected


def test_an_invalid_rules_document_is_ignored() -> None:
    assert parse_document(BusinessRules, b"{not json") is None
    assert parse_document(BusinessRules, b'{"unknown_rule": 1}') is None
    rules = parse_document(BusinessRules, b'{"banned_items": ["x"]}')
    assert rules is not None and rules.banned_items == ["x"]


def test_an_invalid_experiment_document_is_ignored() -> None:
    assert parse_document(Experiment, b'{"arms": []}') is None
    assert parse_document(Experiment, b'{"arms": [{"name": "f", "policy": "frozen"}]}') is None
    stored = parse_document(Experiment, b'{"name": "e1", "arms": [{"name": "m", "policy": '
                            b'"model", "weight": 2}]}')
    assert stored is not None and stored.arms[0].weight == 2.0
