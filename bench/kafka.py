"""The yardstick: raw confluent-kafka throughput and latency on the local broker.

Every later figure (ingest, serving) is compared against these, measured on the same machine.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from bench.report import percentile, print_table, write_result
from streams.kafka.principals import ADMIN
from streams.kafka.producer import EventProducer
from streams.pacing import Pacer
from streams.service_settings import ServiceSettings

_PARTITIONS = 4


def _create_topic(admin: AdminClient, name: str) -> None:
    for future in admin.create_topics([NewTopic(name, _PARTITIONS, 1)]).values():
        future.result()


def _consumer(
    bootstrap: dict[str, object], topic: str, assigned: threading.Event | None = None
) -> Consumer:
    consumer = Consumer(
        {
            **bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 5,
        }
    )
    if assigned is None:
        consumer.subscribe([topic])
    else:
        consumer.subscribe([topic], on_assign=lambda _c, _p: assigned.set())
    return consumer


def _produce_rate(producer: EventProducer, topic: str, messages: int, size: int) -> float:
    payload = b"x" * size
    started = time.perf_counter()
    for i in range(messages):
        producer.send_raw(topic, str(i % 1024).encode(), payload)
    producer.flush(120)
    return messages / (time.perf_counter() - started)


def _consume_rate(consumer: Consumer, messages: int) -> float:
    seen, started = 0, 0.0
    deadline = time.monotonic() + 120
    while seen < messages and time.monotonic() < deadline:
        batch = consumer.consume(num_messages=10_000, timeout=1.0)
        if batch and not started:
            started = time.perf_counter()  # exclude group join and first fetch set-up
        seen += sum(1 for m in batch if m.error() is None)
    if seen < messages:
        raise RuntimeError(f"consumed only {seen}/{messages} messages")
    return seen / (time.perf_counter() - started)


def _latencies(
    producer: EventProducer,
    consumer: Consumer,
    assigned: threading.Event,
    topic: str,
    rate: float,
    seconds: float,
) -> list[float]:
    total = int(rate * seconds)
    latencies: list[float] = []
    done = threading.Event()

    def consume() -> None:
        # poll() returns as soon as one record is there; consume(n, t) would wait for n or t.
        while len(latencies) < total and not done.is_set():
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                (sent,) = struct.unpack("!d", (message.value() or b"")[:8])
                latencies.append((time.perf_counter() - sent) * 1000)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    # The clock starts once the consumer owns the partitions, or the join would count as latency.
    if not assigned.wait(30):
        raise RuntimeError("latency consumer got no partitions within 30s")
    time.sleep(0.5)
    pacer = Pacer(rate)
    for i in range(total):
        pacer.wait()
        producer.send_raw(
            topic, str(i).encode(), struct.pack("!d", time.perf_counter()) + b"x" * 192
        )
        producer.poll(0)
    producer.flush(60)
    thread.join(timeout=30)
    done.set()
    return latencies


def run(
    json_path: Path, messages: int, size: int, latency_rate: float, latency_seconds: float
) -> None:
    # Its own topics, outside the catalog: created, written and read as admin.
    kafka = ServiceSettings().kafka.with_default_principal(ADMIN)
    config = kafka.client_config()
    admin = AdminClient(config)
    throughput_topic = f"bench.kafka.{uuid.uuid4().hex[:8]}"
    latency_topic = f"{throughput_topic}.latency"
    _create_topic(admin, throughput_topic)
    _create_topic(admin, latency_topic)
    try:
        producer = EventProducer(kafka)
        produce = _produce_rate(producer, throughput_topic, messages, size)
        consumer = _consumer(config, throughput_topic)
        consume = _consume_rate(consumer, messages)
        consumer.close()
        # Linger 0: each record leaves at once, so we measure the pipe and not batching.
        latency_producer = EventProducer(kafka, **{"linger.ms": 0})
        assigned = threading.Event()
        latency_consumer = _consumer(config, latency_topic, assigned)
        lat = _latencies(
            latency_producer,
            latency_consumer,
            assigned,
            latency_topic,
            latency_rate,
            latency_seconds,
        )
        latency_consumer.close()
    finally:
        for future in admin.delete_topics([throughput_topic, latency_topic]).values():
            future.result()
    p50, p99 = round(percentile(lat, 50), 3), round(percentile(lat, 99), 3)
    result = {
        "produce_msgs_per_s": round(produce),
        "consume_msgs_per_s": round(consume),
        "latency_ms": {"p50": p50, "p99": p99},
        "messages": messages,
        "value_bytes": size,
        "latency_offered_rate": latency_rate,
        "latency_samples": len(lat),
        "partitions": _PARTITIONS,
        "producer": "idempotent, acks=all, lz4",
    }
    write_result(json_path, result)
    print_table(
        "bench kafka",
        [
            ("produce msgs/s", f"{produce:,.0f}"),
            ("consume msgs/s", f"{consume:,.0f}"),
            (f"latency p50 ms @{latency_rate:.0f}/s", f"{p50}"),
            (f"latency p99 ms @{latency_rate:.0f}/s", f"{p99}"),
        ],
    )
