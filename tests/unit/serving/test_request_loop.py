"""The scorer's request loop defers each batch's flush and commit by one poll, never past it.

Stand-ins for the consumer and producer record the order of calls (the real Kafka behaviour of
the scorer is covered by tests/integration/serving)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from schemas.recommendations import RecommendationRequest
from schemas.wire import encode
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
    def __init__(self, log: list[str], fail_flush: bool = False) -> None:
        self.log, self.fail_flush = log, fail_flush

    def poll(self, timeout_s: float = 0.0) -> int:
        return 0

    def flush(self, timeout_s: float = 30.0) -> None:
        self.log.append("flush")
        if self.fail_flush:
            raise DeliveryError("1 records failed: rec.responses: broker down")


def _loop(
    batches: list[list[_Message]],
    log: list[str],
    producer: _Producer,
    commit_interval_s: float = 0.0,
    clock: list[float] | None = None,
) -> RequestLoop:
    def handle(batch: list[Envelope[RecommendationRequest]]) -> list[RecordRejected]:
        log.append(f"answer {[e.record.request_id for e in batch]}")
        return []

    consumer: Any = _Consumer(batches, log)
    return RequestLoop(ServeMetrics(), consumer, handle, producer,  # type: ignore[arg-type]
                       dead_letters=None,  # type: ignore[arg-type]
                       batch_size=64, fill_s=0.0, commit_interval_s=commit_interval_s,
                       clock=lambda: clock[0] if clock else 0.0)


def test_a_batch_is_committed_after_the_next_poll_and_before_the_next_answers() -> None:
    log: list[str] = []
    loop = _loop([[_Message(0), _Message(1)], [_Message(2)]], log, _Producer(log))
    loop.run_once()
    loop.run_once()
    loop.settle()
    assert log == [
        "poll [0, 1]", "answer ['r0', 'r1']",
        "poll [2]", "flush", "commit 1", "answer ['r2']",
        "flush", "commit 2",
    ]
    assert loop.counters.consumed == loop.counters.handled == 3


def test_an_idle_poll_still_commits_the_answered_batch() -> None:
    log: list[str] = []
    loop = _loop([[_Message(0)]], log, _Producer(log))
    loop.run_once()
    loop.run_once()
    assert log[-3:] == ["poll []", "flush", "commit 0"]
    loop.settle()
    assert log.count("commit 0") == 1


def test_an_unacknowledged_batch_is_never_committed() -> None:
    log: list[str] = []
    loop = _loop([[_Message(0)], [_Message(1)]], log, _Producer(log, fail_flush=True))
    loop.run_once()
    with pytest.raises(DeliveryError):
        loop.run_once()
    assert not any(entry.startswith("commit") for entry in log)


def test_batches_within_the_commit_interval_share_one_flush_and_commit() -> None:
    log: list[str] = []
    clock = [0.0]
    loop = _loop([[_Message(0)], [_Message(1)], [_Message(2)], []], log, _Producer(log),
                 commit_interval_s=0.1, clock=clock)
    loop.run_once()
    clock[0] = 0.05
    loop.run_once()
    assert "commit" not in " ".join(log)
    clock[0] = 0.12
    loop.run_once()
    assert log[-3:] == ["flush", "commit 1", "answer ['r2']"]
    clock[0] = 0.15
    loop.run_once()  # idle, inside the next interval: nothing yet
    assert log[-1] == "poll []"
    loop.settle()  # stop or revoke: forced
    assert log[-2:] == ["flush", "commit 2"]
