"""The item state table: lookups of what was loaded, kept current from the changes Redis reports."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from unittest.mock import patch

import numpy as np
import redis

from serving.features import StateArrays, item_state_arrays
from serving.item_state_table import ItemStateTable
from tests.unit.serving.fakes import ItemState, state_reader


class _Store:
    """Item states by id, read as Redis would answer (an unknown item has no state yet)."""

    def __init__(self, states: dict[str, ItemState], fail_reads: int = 0) -> None:
        self.states = states
        self.reads: list[list[str]] = []
        self.fail_reads = fail_reads

    def read(self, item_ids: Sequence[str]) -> StateArrays:
        self.reads.append(list(item_ids))
        if self.fail_reads:
            self.fail_reads -= 1
            raise redis.ConnectionError("down")
        return state_reader(self.states)(item_ids)


def test_a_loaded_catalog_is_looked_up_without_reads() -> None:
    store = _Store({"a": (1.0, 2.0, 3.0)})
    table = ItemStateTable(reads_per_s=1e6, chunk=2)
    table.load(store.read, ["a", "b", "c"])
    assert store.reads == [["a", "b"], ["c"]]
    first, last, events = table.states(["a", "c", "unknown"])
    np.testing.assert_array_equal(first, [1.0, np.nan, np.nan])
    np.testing.assert_array_equal(last, [2.0, np.nan, np.nan])
    np.testing.assert_array_equal(events, [3.0, 0.0, 0.0])
    assert len(store.reads) == 2


def _follow(
    table: ItemStateTable, store: _Store, reported: list[set[str] | redis.RedisError | None]
) -> None:
    """Follows until `reported` is used up (each call of `changes` takes the next, or raises
    it)."""
    stop = threading.Event()

    def changes() -> set[str] | None:
        if len(reported) == 1:
            stop.set()
        report = reported.pop(0)
        if isinstance(report, redis.RedisError):
            raise report
        return report

    table.follow(store.read, changes, stop, interval_s=0.0)


def test_following_rereads_what_changed_and_everything_when_a_change_may_be_missed() -> None:
    store = _Store({"a": (1.0, 2.0, 3.0)})
    table = ItemStateTable(reads_per_s=1e6, chunk=2)
    table.load(state_reader(dict.fromkeys("abc", (0.0, 0.0, 0.0))), ["a", "b", "c"])
    _follow(table, store, [None, {"c"}, {"b", "not-held"}, set(), None, set()])
    assert store.reads == [["a", "b"], ["c"], ["c"], ["b"], ["a", "b"], ["c"]]
    first, last, events = table.states(["a", "b", "not-held"])
    np.testing.assert_array_equal(first, [1.0, np.nan, np.nan])
    np.testing.assert_array_equal(last, [2.0, np.nan, np.nan])
    np.testing.assert_array_equal(events, [3.0, 0.0, 0.0])
    assert len(table) == 3


def test_when_redis_cannot_report_changes_the_table_is_swept_and_later_reports_followed(
) -> None:
    store = _Store({"a": (1.0, 2.0, 3.0)})
    table = ItemStateTable(reads_per_s=1e6, chunk=2)
    table.load(state_reader(dict.fromkeys("abc", (0.0, 0.0, 0.0))), ["a", "b", "c"])
    refused = redis.ConnectionError("item change tracking refused: NOPERM")
    _follow(table, store, [refused, refused, {"c"}, set()])
    assert store.reads == [["a", "b"], ["c"], ["a", "b"], ["c"], ["c"]]
    np.testing.assert_array_equal(table.states(["a"])[2], [3.0])


def test_what_a_failed_read_was_to_read_is_read_on_the_next_try() -> None:
    store = _Store({"a": (1.0, 2.0, 3.0), "b": (4.0, 5.0, 6.0)}, fail_reads=1)
    table = ItemStateTable(reads_per_s=1e6, chunk=2)
    table.load(state_reader(dict.fromkeys("abc", (0.0, 0.0, 0.0))), ["a", "b", "c"])
    with patch("serving.item_state_table.RETRY_S", 0.0):
        _follow(table, store, [{"a"}, {"b"}, set()])
    assert [sorted(r) for r in store.reads] == [["a"], ["a", "b"]]
    np.testing.assert_array_equal(table.states(["a", "b", "c"])[2], [3.0, 6.0, 0.0])


def test_hmget_replies_parse_into_arrays_and_what_is_not_a_finite_number_counts_as_missing(
) -> None:
    replies: list[list[bytes | None]] = [
        [b"100.000", b"200.500", b"2", None, b"1", None],
        [None, None, None, None, None, None],
        [b"5.000", b"not-a-time", b"1", b"1", b"inf", b"1"],
        [b"7.000", b"8.000", b"1", b"0", b"0", b"0"],
    ]
    first, last, events = item_state_arrays(replies)
    np.testing.assert_array_equal(first, [100.0, np.nan, 5.0, 7.0])
    np.testing.assert_array_equal(last, [200.5, np.nan, np.nan, 8.0])
    np.testing.assert_array_equal(events, [3.0, 0.0, 3.0, 1.0])
    assert all(len(a) == 0 for a in item_state_arrays([]))
