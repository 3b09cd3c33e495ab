from __future__ import annotations

import pyarrow as pa

from online_trainer.online_model import Interaction
from online_trainer.replay import Replayed
from online_trainer.window import from_record_time, merge, split_sources
from schemas import EventType, InteractionEvent

T = 1.7e9


def test_the_archive_serves_a_partition_only_when_it_reaches_back_to_the_window_start() -> None:
    starts = {0: 100, 1: 5, 2: 7, 3: 0}
    ends = {0: 300, 1: 50, 2: 9, 3: 0}
    coverage = {0: (50, 200), 1: (10, 40), 2: (0, 20)}
    sources = split_sources(starts, ends, coverage)
    assert sources.archive == {0: (100, 200), 2: (7, 9)}
    assert sources.tail == {0: 200, 1: 5, 2: 9, 3: 0}
    assert sources.before_kafka == frozenset()


def test_records_kafka_no_longer_holds_come_from_the_archive_by_record_time() -> None:
    starts, ends = {0: 30, 1: 30}, {0: 60, 1: 60}
    lows = {0: 30, 1: 10}  # partition 0 starts at Kafka's oldest record; 1 does not
    sources = split_sources(starts, ends, {0: (0, 50), 1: (20, 25)}, lows)
    assert sources.archive == {0: (0, 50)}
    assert sources.tail == {0: 50, 1: 30}
    assert sources.before_kafka == frozenset({0})
    table = pa.table({
        "kafka_partition": pa.array([0, 0, 0, 0, 2], pa.int32()),
        "kafka_offset": [3, 4, 5, 6, 0],
        "kafka_timestamp_ms": [100, 250, 180, 300, 0],
    })
    kept = from_record_time(table, frozenset({0}), since_ms=200)
    assert kept["kafka_offset"].to_pylist() == [4, 5, 6, 0]


def _replayed(user: str, ts: float, kafka_ms: int, partition: int, offset: int) -> Replayed:
    event = InteractionEvent(event_id=f"e{offset}", user_id=user, session_id="s", item_id="i",
                             event_type=EventType.CLICK, timestamp=ts)
    return Replayed(event, kafka_ms, partition, offset)


def test_archive_rows_and_replayed_records_share_the_replays_order() -> None:
    table = pa.table({
        "user_id": ["a", "b"], "item_id": ["i", "i"], "timestamp": [T + 5.0, T + 5.0],
        "kafka_timestamp_ms": [7, 7], "kafka_partition": pa.array([1, 0], pa.int32()),
        "kafka_offset": [3, 9],
    })
    records = [_replayed("c", T + 5.0, 6, 2, 0), _replayed("d", T + 4.0, 9, 0, 10)]
    merged = merge(table, records)
    expected_order = sorted(
        [*records, _replayed("a", T + 5.0, 7, 1, 3), _replayed("b", T + 5.0, 7, 0, 9)],
        key=Replayed.order,
    )
    assert merged == [Interaction(r.event.user_id, "i", int(r.event.timestamp))
                      for r in expected_order]
    assert [i.user for i in merged] == ["d", "c", "b", "a"]
