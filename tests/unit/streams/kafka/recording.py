"""Stand-ins for a consumer and a producer that record what a loop does (no broker involved;
the same loops run against the real Kafka in tests/integration)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from confluent_kafka import Message
from pydantic import BaseModel

from schemas.wire import encode
from tests.hostile_corpus import Hostile


def messages(topic: str, records: Sequence[Hostile]) -> list[Message]:
    out = []
    for n, h in enumerate(records):
        headers: Any = h.headers
        out.append(
            Message(
                topic=topic, partition=0, offset=n, key=h.key, value=h.value, headers=headers,
                timestamp=(1, 1_700_000_000_000),
            )
        )
    return out


class RecordingConsumer:
    def __init__(self, batches: list[list[Message]]) -> None:
        self.batches = batches
        self.committed: list[int] = []

    def poll_batch(self, max_messages: int, timeout_s: float) -> list[Message]:
        return self.batches.pop(0) if self.batches else []

    def poll_ready(self, max_messages: int, wait_s: float, fill_s: float = 0.0) -> list[Message]:
        return self.poll_batch(max_messages, wait_s)

    def commit(self, batch: Sequence[Message]) -> None:
        self.committed.extend(m.offset() or 0 for m in batch)


class RecordingProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | str | None, bytes | None]] = []

    def send(self, topic: str, key: str | bytes | None, record: BaseModel) -> None:
        self.send_raw(topic, key, encode(record))

    def send_raw(self, topic: str, key: str | bytes | None, value: bytes | None) -> None:
        self.sent.append((topic, key, value))

    def poll(self, timeout_s: float = 0.0) -> int:
        return 0

    def flush(self, timeout_s: float = 30.0) -> None:
        return None

    def to(self, topic: str) -> list[bytes | None]:
        return [value for t, _, value in self.sent if t == topic]
