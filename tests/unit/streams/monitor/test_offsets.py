import math

from streams.monitor.offsets import CommitTracker


def positions(tracker: CommitTracker, horizon: float) -> dict[tuple[str, int], int]:
    return {(tp.topic, tp.partition): tp.offset for tp in tracker.release(horizon)}


def test_commits_stop_at_the_first_batch_still_holding_state() -> None:
    tracker = CommitTracker()
    for offset, at in [(0, 100.0), (1, 110.0)]:
        tracker.track("responses", 0, offset, at)
    tracker.seal()
    for offset, at in [(2, 200.0), (3, 210.0)]:
        tracker.track("responses", 0, offset, at)
    tracker.seal()
    assert positions(tracker, horizon=100.0) == {}
    assert positions(tracker, horizon=150.0) == {("responses", 0): 2}
    assert positions(tracker, horizon=math.inf) == {("responses", 0): 4}


def test_records_without_state_never_hold_the_commit_back() -> None:
    tracker = CommitTracker()
    tracker.track("interactions", 1, 7, -math.inf)
    tracker.seal()
    assert positions(tracker, horizon=0.0) == {("interactions", 1): 8}


def test_an_offset_already_committed_is_not_committed_again() -> None:
    tracker = CommitTracker()
    tracker.track("responses", 0, 0, 1.0)
    tracker.seal()
    offsets = tracker.release(10.0)
    tracker.committed(offsets)
    assert tracker.release(10.0) == []


def test_partitions_are_independent() -> None:
    tracker = CommitTracker()
    tracker.track("responses", 0, 0, 100.0)
    tracker.track("responses", 1, 50, 500.0)
    tracker.seal()
    assert positions(tracker, horizon=200.0) == {("responses", 0): 1}


def test_a_revoked_partition_is_forgotten() -> None:
    tracker = CommitTracker()
    tracker.track("responses", 0, 0, 100.0)
    tracker.seal()
    tracker.forget("responses", 0)
    assert tracker.release(math.inf) == []
