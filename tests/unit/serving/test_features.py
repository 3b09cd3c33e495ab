from serving.features import merge_popularity, parse_rules, parse_sequence


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


def test_an_invalid_rules_document_is_ignored() -> None:
    assert parse_rules(b"{not json") is None
    assert parse_rules(b'{"unknown_rule": 1}') is None
    rules = parse_rules(b'{"banned_items": ["x"]}')
    assert rules is not None and rules.banned_items == ["x"]
