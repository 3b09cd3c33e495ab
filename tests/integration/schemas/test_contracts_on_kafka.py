from __future__ import annotations

import json
import uuid

from schemas import DeadLetter, InteractionEvent, decode, encode
from schemas.limits import MAX_PAYLOAD_BYTES
from schemas.topics import INTERACTIONS, dead_letter_topic
from streams.kafka.connection import KafkaConnection
from streams.kafka.consumer import BatchConsumer
from streams.kafka.contract_loop import ContractLoop, Envelope, RecordRejected
from streams.kafka.deadletter import DeadLetterWriter
from streams.kafka.producer import EventProducer
from tests.contract_examples import examples
from tests.integration.kafka_helpers import read_all


def test_every_contract_round_trips_through_a_real_topic(kafka: KafkaConnection) -> None:
    topic = kafka.topic(INTERACTIONS)
    producer = EventProducer(kafka)
    sent = examples()
    for name, record in sent.items():
        producer.send_raw(topic, name.encode(), encode(record))
    producer.flush()
    received = {(m.key() or b"").decode(): m.value() for m in read_all(kafka, topic, len(sent))}
    assert set(received) == set(sent)
    for name, record in sent.items():
        assert decode(type(record), received[name]) == record


def _valid_event_bytes(n: int) -> bytes:
    body = json.loads(encode(examples()["InteractionEvent"]))
    body["event_id"] = f"ok-{n}"
    return json.dumps(body).encode()


def _hostile() -> dict[str, bytes]:
    good = json.loads(_valid_event_bytes(0))
    without_session = {k: v for k, v in good.items() if k != "session_id"}
    return {
        "malformed-json": b'{"event_id": "x", ',
        "unknown-field": json.dumps({**good, "admin": True}).encode(),
        "nan": json.dumps({**good, "timestamp": float("nan")}).encode(),
        "wrong-type": json.dumps({**good, "user_id": 12345}).encode(),
        "missing-field": json.dumps(without_session).encode(),
        "oversized": json.dumps({**good, "event_id": "x" * (MAX_PAYLOAD_BYTES + 1)}).encode(),
        "invalid-utf8": b'{"event_id": "\xff\xfe"}',
        "bad-timestamp": json.dumps({**good, "timestamp": -1.0}).encode(),
    }


def test_each_kind_of_invalid_message_is_dead_lettered_while_the_consumer_keeps_going(
    kafka: KafkaConnection,
) -> None:
    topic = kafka.topic(INTERACTIONS)
    producer = EventProducer(kafka)
    hostile = _hostile()
    # Interleave: good, bad, good, bad... all on one key so the order is the partition order.
    for n, (name, raw) in enumerate(hostile.items()):
        producer.send_raw(topic, f"k-{name}".encode(), _valid_event_bytes(n))
        producer.send_raw(topic, f"k-{name}".encode(), raw)
    producer.flush()

    handled: list[Envelope[InteractionEvent]] = []

    def handler(batch: list[Envelope[InteractionEvent]]) -> list[RecordRejected]:
        handled.extend(batch)
        return []

    consumer = BatchConsumer(kafka, f"g-{uuid.uuid4().hex[:8]}", [topic])
    loop = ContractLoop(
        consumer, InteractionEvent, handler, producer, DeadLetterWriter(producer, "test")
    )
    total = 2 * len(hostile)
    for _ in range(200):
        loop.run_once()
        if loop.counters.consumed >= total:
            break
    consumer.close()

    assert loop.counters.consumed == total
    assert len(handled) == len(hostile)
    assert loop.counters.dead_lettered == len(hostile)

    letters = [
        decode(DeadLetter, m.value())
        for m in read_all(kafka, dead_letter_topic(topic), len(hostile))
    ]
    assert len(letters) == len(hostile)
    by_key = {m.original_key.decode(): m for m in letters if m.original_key}
    assert set(by_key) == {f"k-{name}" for name in hostile}
    for name, raw in hostile.items():
        letter = by_key[f"k-{name}"]
        assert letter.original_value == raw, name
        assert letter.source_topic == topic
        assert letter.source_offset >= 0
        assert letter.stage == "validate"
        assert letter.error_class in {
            "MalformedJson",
            "SchemaViolation",
            "InvalidEncoding",
            "PayloadTooLarge",
        }
        assert letter.error_message
    assert by_key["k-oversized"].error_class == "PayloadTooLarge"
    assert by_key["k-invalid-utf8"].error_class == "InvalidEncoding"
    assert by_key["k-malformed-json"].error_class == "MalformedJson"


def test_a_record_the_handler_rejects_is_dead_lettered_at_the_apply_stage(
    kafka: KafkaConnection,
) -> None:
    topic = kafka.topic(INTERACTIONS)
    producer = EventProducer(kafka)
    for n in range(3):
        producer.send_raw(topic, b"u", _valid_event_bytes(n))
    producer.flush()

    def handler(batch: list[Envelope[InteractionEvent]]) -> list[RecordRejected]:
        return [
            RecordRejected(env, ValueError("cannot apply"))  # type: ignore[arg-type]
            for env in batch
            if env.record.event_id == "ok-1"
        ]

    consumer = BatchConsumer(kafka, f"g-{uuid.uuid4().hex[:8]}", [topic])
    loop: ContractLoop[InteractionEvent] = ContractLoop(
        consumer, InteractionEvent, handler, producer, DeadLetterWriter(producer, "test")
    )
    while loop.counters.consumed < 3:
        loop.run_once()
    consumer.close()
    assert (loop.counters.handled, loop.counters.dead_lettered) == (2, 1)
    (letter,) = [
        decode(DeadLetter, m.value()) for m in read_all(kafka, dead_letter_topic(topic), 1)
    ]
    assert letter.stage == "apply"
    assert letter.error_class == "ValueError"


def test_committed_offsets_resume_after_the_last_processed_batch(kafka: KafkaConnection) -> None:
    topic = kafka.topic(INTERACTIONS)
    producer = EventProducer(kafka)
    for n in range(5):
        producer.send_raw(topic, b"u", _valid_event_bytes(n))
    producer.flush()
    group = f"g-{uuid.uuid4().hex[:8]}"
    seen: list[str] = []

    def handler(batch: list[Envelope[InteractionEvent]]) -> list[RecordRejected]:
        seen.extend(env.record.event_id for env in batch)
        return []

    def drain(expected: int) -> None:
        consumer = BatchConsumer(kafka, group, [topic])
        loop: ContractLoop[InteractionEvent] = ContractLoop(
            consumer, InteractionEvent, handler, producer, DeadLetterWriter(producer, "test")
        )
        for _ in range(200):
            loop.run_once()
            if len(seen) >= expected:
                break
        consumer.close()

    drain(5)
    for n in range(5, 8):
        producer.send_raw(topic, b"u", _valid_event_bytes(n))
    producer.flush()
    drain(8)
    assert seen == [f"ok-{n}" for n in range(8)]
