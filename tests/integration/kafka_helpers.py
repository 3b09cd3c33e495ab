"""Reading topics back in tests, with a fresh consumer group each time."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Message

from streams.kafka.connection import KafkaConnection


def read_all(
    connection: KafkaConnection, topic: str, expected: int, timeout_s: float = 30.0
) -> list[Message]:
    """Every record of `topic` from the beginning, waiting until at least `expected` arrived."""
    consumer = Consumer(
        {
            **connection.client_config(),
            "group.id": f"test-reader-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    records: list[Message] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                if message.error() is None:
                    records.append(message)
            if len(records) >= expected:
                # One more short poll to catch anything beyond what we expected (duplicates).
                records.extend(m for m in consumer.consume(1000, 0.5) if m.error() is None)
                break
    finally:
        consumer.close()
    return records
