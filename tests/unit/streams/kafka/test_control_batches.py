"""A control topic's loop (fill_batches=False) hands a record over as soon as it arrives: it asks
the consumer for what is ready, never for a batch to fill."""

from __future__ import annotations

from confluent_kafka import Message

from schemas import encode
from schemas.catalog import CatalogItem
from streams.kafka.contract_loop import ContractLoop, Envelope, RecordRejected
from tests.hostile_corpus import Hostile
from tests.unit.streams.kafka.recording import RecordingConsumer, RecordingProducer, messages


class ReadyOnly(RecordingConsumer):
    def __init__(self, batches: list[list[Message]]) -> None:
        super().__init__(batches)
        self.waits: list[float] = []

    def poll_batch(self, max_messages: int, timeout_s: float) -> list[Message]:
        raise AssertionError("a control loop never waits for a batch to fill")

    def poll_ready(self, max_messages: int, wait_s: float, fill_s: float = 0.0) -> list[Message]:
        self.waits.append(fill_s)
        return self.batches.pop(0) if self.batches else []


def test_a_control_loop_hands_over_what_is_ready_without_filling_a_batch() -> None:
    item = CatalogItem(item_id="i1", genres=["Drama"], updated_at=1_700_000_000.0)
    consumer = ReadyOnly([messages("catalog.items", [Hostile("one", b"i1", encode(item))])])
    seen: list[str] = []

    def handler(envelopes: list[Envelope[CatalogItem]]) -> list[RecordRejected]:
        seen.extend(e.record.item_id for e in envelopes)
        return []

    loop = ContractLoop(
        consumer, CatalogItem, handler, RecordingProducer(), None,  # type: ignore[arg-type]
        batch_size=100, batch_timeout_s=0.2, fill_batches=False,
    )
    assert loop.run_once() == 1 and seen == ["i1"] and consumer.waits == [0.0]
    assert consumer.committed == [0]
