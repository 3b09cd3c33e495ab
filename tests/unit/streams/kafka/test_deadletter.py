from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaException

from schemas import ContractError, DeadLetter, decode, encode
from schemas.deadletter import MAX_ORIGINAL_BYTES
from streams.kafka.deadletter import DeadLetterWriter, SourcePosition, build_dead_letter
from tests.unit.streams.kafka.recording import RecordingProducer

SOURCE = SourcePosition("interactions", 3, 17, 1_700_000_000_000)


def test_dead_letter_carries_the_original_bytes_and_its_position() -> None:
    letter = build_dead_letter(
        b"u1", b"\xff{", ContractError("InvalidEncoding", "bad"), SOURCE, "validate", "stream"
    )
    assert (letter.original_key, letter.original_value) == (b"u1", b"\xff{")
    assert (letter.source_topic, letter.source_partition, letter.source_offset) == (
        "interactions",
        3,
        17,
    )
    assert letter.error_class == "InvalidEncoding"
    assert not letter.original_truncated
    assert decode(DeadLetter, encode(letter)) == letter


def test_an_original_larger_than_the_cap_is_kept_truncated_and_flagged() -> None:
    huge = b"x" * (MAX_ORIGINAL_BYTES + 10)
    letter = build_dead_letter(None, huge, ValueError("big"), SOURCE, "validate", "stream")
    assert letter.original_truncated
    assert letter.original_value == huge[:MAX_ORIGINAL_BYTES]
    assert decode(DeadLetter, encode(letter)).original_value == letter.original_value


def test_error_class_of_a_plain_exception_is_its_type_and_the_message_is_printable() -> None:
    letter = build_dead_letter(None, b"{}", KeyError("line\nbreak\x00"), SOURCE, "apply", "stream")
    assert letter.error_class == "KeyError"
    assert letter.error_message.isprintable()


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


def test_a_letter_is_built_for_any_exception_however_odd() -> None:
    not_an_id = type("Ошибка класса", (Exception,), {})("x\u202e\n")
    for error in (_Unprintable(), not_an_id, ContractError("", "")):
        letter = build_dead_letter(b"k", b"v", error, SOURCE, "apply", "stream")
        assert decode(DeadLetter, encode(letter)) == letter


def test_a_letter_the_producer_refuses_is_replaced_by_one_without_the_originals() -> None:
    class Refusing(RecordingProducer):
        def send_raw(self, topic: str, key: str | bytes | None, value: bytes | None) -> None:
            if key is not None:
                raise KafkaException("Message size too large")
            super().send_raw(topic, key, value)

    producer = Refusing()
    sink: Any = producer
    DeadLetterWriter(sink, "stream").write(b"k" * 10, b"v", ValueError("bad"), SOURCE)
    (raw,) = producer.to("interactions.dlq")
    letter = decode(DeadLetter, raw)
    assert (letter.original_key, letter.original_value, letter.original_truncated) == (
        None, None, True
    )
    assert letter.source_offset == SOURCE.offset
    assert letter.error_class == "ValueError"
    assert "originals dropped: KafkaException" in letter.error_message
