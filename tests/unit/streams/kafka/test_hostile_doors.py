"""Every door's decode turns away every record of its hostile corpus with a ContractError only,
and the shared contract loop dead-letters each of them (with its original bytes and position)
without ever calling the handler or raising; the scorer's door is in tests/unit/serving."""

from __future__ import annotations

from typing import Any

import pytest

from schemas import ContractError, DeadLetter, decode
from schemas.registry import RECORDS
from schemas.topics import dead_letter_topic
from streams.kafka.contract_loop import ContractLoop, Envelope, RecordRejected
from streams.kafka.deadletter import DeadLetterWriter
from tests.hostile_corpus import DOORS, corpus
from tests.unit.streams.kafka.recording import RecordingConsumer, RecordingProducer, messages


@pytest.mark.parametrize("door", sorted(DOORS))
def test_decode_rejects_every_hostile_record_with_a_contract_error(door: str) -> None:
    model = RECORDS[DOORS[door].record]
    accepted = []
    for hostile in corpus(door):
        try:
            decode(model, hostile.value)
        except ContractError as error:
            assert error.kind in {
                "MalformedJson", "SchemaViolation", "InvalidEncoding", "PayloadTooLarge",
                "MissingValue",
            }
            continue
        accepted.append(hostile.name)
    assert accepted == []


@pytest.mark.parametrize("door", sorted(DOORS))
def test_the_contract_loop_dead_letters_every_hostile_record_and_keeps_going(door: str) -> None:
    hostile = corpus(door)
    batch = messages(door, hostile)
    consumer, producer = RecordingConsumer([batch[:20], batch[20:]]), RecordingProducer()
    handled: list[Envelope[Any]] = []

    def handler(envelopes: list[Envelope[Any]]) -> list[RecordRejected]:
        handled.extend(envelopes)
        return []

    loop: ContractLoop[Any] = ContractLoop(
        consumer, RECORDS[DOORS[door].record], handler,  # type: ignore[arg-type]
        producer, DeadLetterWriter(producer, "test"),  # type: ignore[arg-type]
    )
    while loop.run_once():
        pass

    assert handled == []
    assert consumer.committed == list(range(len(hostile)))
    letters = [decode(DeadLetter, raw) for raw in producer.to(dead_letter_topic(door))]
    assert [letter.source_offset for letter in letters] == list(range(len(hostile)))
    for letter, record in zip(letters, hostile, strict=True):
        assert (letter.original_key, letter.original_value) == (record.key, record.value)
        assert letter.stage == "validate" and letter.source_topic == door
    assert loop.counters.dead_lettered == len(hostile)
    # Dead-lettered records count as read: a reader waiting for the end is not held up.
    assert loop.finished == {(door, 0): len(hostile)}



def test_a_control_loop_dead_letters_a_record_its_handler_raises_on_and_handles_the_rest() -> None:
    from schemas import encode
    from tests.contract_examples import examples
    from tests.hostile_corpus import Hostile

    alert = encode(examples()["DriftAlert"])
    batch = messages("alerts.drift", [Hostile(f"ok {n}", b"k", alert) for n in range(3)])
    consumer, producer = RecordingConsumer([batch]), RecordingProducer()
    handled: list[int] = []

    def handler(envelopes: list[Envelope[Any]]) -> list[RecordRejected]:
        (envelope,) = envelopes  # isolated: one record per call
        if envelope.position.offset == 1:
            raise ZeroDivisionError("a bug this record finds")
        handled.append(envelope.position.offset)
        return []

    loop: ContractLoop[Any] = ContractLoop(
        consumer, RECORDS["DriftAlert"], handler, producer,  # type: ignore[arg-type]
        DeadLetterWriter(producer, "test"), isolate_records=True,
    )
    assert loop.run_once() == 3
    assert handled == [0, 2] and consumer.committed == [0, 1, 2]
    (letter,) = [decode(DeadLetter, raw) for raw in producer.to("alerts.drift.dlq")]
    assert (letter.source_offset, letter.stage, letter.error_class) == (
        1, "apply", "ZeroDivisionError"
    )
