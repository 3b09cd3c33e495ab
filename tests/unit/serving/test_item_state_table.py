"""The item state table: lookups of what was loaded, refreshed chunk by chunk in the background."""

from __future__ import annotations

import threading
from collections.abc import Sequence

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


def test_the_refresh_rereads_the_catalog_until_stopped_and_outlives_a_failed_read() -> None:
    store = _Store({"a": (1.0, 2.0, 3.0)}, fail_reads=1)
    table = ItemStateTable(reads_per_s=1e6, chunk=2)
    table.load(state_reader(dict.fromkeys("abc", (0.0, 0.0, 0.0))), ["a", "b", "c"])
    stop = threading.Event()

    def read(item_ids: Sequence[str]) -> StateArrays:
        if len(store.reads) >= 5:
            stop.set()
        return store.read(item_ids)

    table.refresh(read, stop)
    # The failed chunk is read again on the next sweep.
    assert store.reads[:3] == [["a", "b"], ["c"], ["a", "b"]]
    first, last, events = table.states(["a", "b"])
    np.testing.assert_array_equal(first, [1.0, np.nan])
    np.testing.assert_array_equal(last, [2.0, np.nan])
    np.testing.assert_array_equal(events, [3.0, 0.0])


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
