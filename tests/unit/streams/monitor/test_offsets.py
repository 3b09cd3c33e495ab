import math

from confluent_kafka import TopicPartition

from streams.monitor.offsets import CommitTracker, commit_metadata, reported_through


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
    assert positions(tracker, horizon=100.0) == {("responses", 0): 0}
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
    assert positions(tracker, horizon=200.0) == {("responses", 0): 1, ("responses", 1): 50}


def test_a_revoked_partition_is_forgotten() -> None:
    tracker = CommitTracker()
    tracker.track("responses", 0, 0, 100.0)
    tracker.seal()
    tracker.forget("responses", 0)
    assert tracker.release(math.inf) == []


def test_every_position_can_be_recommitted_to_refresh_its_metadata() -> None:
    tracker = CommitTracker()
    tracker.track("responses", 0, 0, 1.0)
    tracker.seal()
    tracker.committed(tracker.release(10.0))
    [again] = tracker.release(10.0, everything=True, metadata=commit_metadata(600.0))
    assert (again.offset, reported_through([again])) == (1, 600.0)


def test_the_reported_bound_is_the_newest_found_in_commit_metadata() -> None:
    commits = [
        TopicPartition("t", 0, 5, metadata=commit_metadata(300.0)),
        TopicPartition("t", 1, 9, metadata=commit_metadata(900.0)),
        TopicPartition("t", 2, 1, metadata="written by someone else"),
        TopicPartition("t", 3, -1001),
    ]
    assert reported_through(commits) == 900.0
    assert reported_through([]) == -math.inf
