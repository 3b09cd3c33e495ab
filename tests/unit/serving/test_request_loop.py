"""The scorer's request loop commits a batch once its answers are acknowledged, never before,
and never waits for the acknowledgement on the request path unless it is overdue or forced.

Stand-ins for the consumer and producer record the order of calls (the real Kafka behaviour of
the scorer is covered by tests/integration/serving)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from schemas.recommendations import RecommendationRequest
from schemas.wire import encode
from serving import request_loop
from serving.metrics import ServeMetrics
from serving.request_loop import RequestLoop
from streams.kafka.contract_loop import Envelope, RecordRejected
from streams.kafka.producer import DeliveryError


class _Message:
    def __init__(self, offset: int) -> None:
        request = RecommendationRequest(
            request_id=f"r{offset}", user_id="u", k=5, sent_at=1_700_000_000.0
        )
        self._value, self._offset = encode(request), offset

    def value(self) -> bytes:
        return self._value

    def key(self) -> bytes:
        return b"u"

    def topic(self) -> str:
        return "rec.requests"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return (0, -1)

    def error(self) -> None:
        return None


class _Consumer:
    def __init__(self, batches: list[list[_Message]], log: list[str]) -> None:
        self.batches, self.log = batches, log

    def poll_ready(self, max_messages: int, wait_s: float, fill_s: float = 0.0) -> list[_Message]:
        batch = self.batches.pop(0) if self.batches else []
        self.log.append(f"poll {[m.offset() for m in batch]}")
        return batch

    def commit(self, batch: Sequence[_Message]) -> None:
        self.log.append(f"commit {batch[-1].offset()}")


class _Producer:
    """Records sent are numbered; `acked` says through which number the broker acknowledged."""

    def __init__(self, log: list[str], fail: bool = False) -> None:
        self.log, self.fail = log, fail
        self.sent = 0
        self.acked = 0

    def poll(self, timeout_s: float = 0.0) -> int:
        return 0

    def mark(self) -> int:
        return self.sent

    def acknowledged(self, mark: int) -> bool:
        if self.fail:
            raise DeliveryError("1 records failed: rec.responses: broker down")
        return self.acked >= mark

    def flush(self, timeout_s: float = 30.0) -> None:
        self.log.append("flush")
        if self.fail:
            raise DeliveryError("1 records failed: rec.responses: broker down")
        self.acked = self.sent


def _loop(
    batches: list[list[_Message]],
    log: list[str],
    producer: _Producer,
    commit_interval_s: float = 0.0,
    clock: list[float] | None = None,
) -> RequestLoop:
    def handle(batch: list[Envelope[RecommendationRequest]]) -> list[RecordRejected]:
        log.append(f"answer {[e.record.request_id for e in batch]}")
        producer.sent += len(batch)
        return []

    consumer: Any = _Consumer(batches, log)
    return RequestLoop(ServeMetrics(), consumer, handle, producer,  # type: ignore[arg-type]
                       dead_letters=None,  # type: ignore[arg-type]
                       batch_size=64, fill_s=0.0, commit_interval_s=commit_interval_s,
                       clock=lambda: clock[0] if clock else 0.0)


def test_a_batch_is_committed_at_the_first_poll_after_its_answers_are_acknowledged() -> None:
    log: list[str] = []
    producer = _Producer(log)
    loop = _loop([[_Message(0), _Message(1)], [_Message(2)], [], []], log, producer)
    loop.run_once()
    loop.run_once()  # batch 0-1 not acknowledged yet: no commit, no wait
    assert log == ["poll [0, 1]", "answer ['r0', 'r1']", "poll [2]", "answer ['r2']"]
    producer.acked = 2
    loop.run_once()
    assert log[-2:] == ["poll []", "commit 1"]
    producer.acked = 3
    loop.run_once()
    assert log[-2:] == ["poll []", "commit 2"]
    assert "flush" not in log
    assert loop.counters.consumed == loop.counters.handled == 3


def test_an_unacknowledged_batch_is_never_committed() -> None:
    log: list[str] = []
    loop = _loop([[_Message(0)], [_Message(1)]], log, _Producer(log, fail=True))
    loop.run_once()
    with pytest.raises(DeliveryError):
        loop.run_once()
    with pytest.raises(DeliveryError):
        loop.settle()
    assert not any(entry.startswith("commit") for entry in log)


def test_a_batch_overdue_for_its_acknowledgement_is_flushed_then_committed() -> None:
    log: list[str] = []
    clock = [0.0]
    producer = _Producer(log)
    loop = _loop([[_Message(0)], []], log, producer, clock=clock)
    loop.run_once()
    clock[0] = request_loop.ACK_WAIT_LIMIT_S + 0.1
    loop.run_once()
    assert log[-3:] == ["poll []", "flush", "commit 0"]


def test_batches_within_the_commit_interval_share_one_commit() -> None:
    log: list[str] = []
    clock = [0.0]
    producer = _Producer(log)
    loop = _loop([[_Message(0)], [_Message(1)], [_Message(2)], []], log, producer,
                 commit_interval_s=0.1, clock=clock)
    loop.run_once()
    clock[0] = 0.05
    producer.acked = 1
    loop.run_once()
    assert "commit" not in " ".join(log)
    clock[0] = 0.12
    producer.acked = 2
    loop.run_once()
    assert log[-2:] == ["commit 1", "answer ['r2']"]
    clock[0] = 0.15
    producer.acked = 3
    loop.run_once()  # idle, inside the next interval: nothing yet
    assert log[-1] == "poll []"
    loop.settle()  # stop or revoke: forced
    assert log[-2:] == ["flush", "commit 2"]


def test_a_forced_settle_flushes_and_commits_what_is_not_acknowledged_yet() -> None:
    log: list[str] = []
    loop = _loop([[_Message(0)], [_Message(1)]], log, _Producer(log))
    loop.run_once()
    loop.run_once()
    loop.settle()
    assert log[-2:] == ["flush", "commit 1"]
    loop.settle()
    assert log.count("commit 1") == 1
