"""The monitor on the real Kafka: responses and later interactions in, KPIs and alerts out."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from typing import TypeVar

import pytest
from confluent_kafka import Consumer, TopicPartition
from pydantic import BaseModel

from schemas.alerts import DriftAlert
from schemas.events import EventType, InteractionEvent
from schemas.kpi import KpiReport
from schemas.recommendations import RecommendationResponse, ScoredItem
from schemas.topics import ALERTS_DRIFT, INTERACTIONS, KPI_METRICS, REC_RESPONSES
from schemas.wire import decode
from streams.drift.config import DriftSettings
from streams.kafka.connection import KafkaConnection
from streams.kafka.producer import EventProducer
from streams.monitor.service import MonitorService
from streams.monitor.settings import MonitorSettings

R = TypeVar("R", bound=BaseModel)
WINDOW_S = 300.0
ATTRIBUTION_S = 60.0
# Far enough in the past that a whole simulated day fits before now; aligned to a window.
T0 = (time.time() // WINDOW_S) * WINDOW_S - 30_000.0
GIVE_UP_S = 120.0  # only bounds a broken run; nothing asserts how long anything took


def response(n: int, user: str, at: float, items: tuple[str, ...] = ("a", "b", "c")) -> (
    RecommendationResponse
):
    return RecommendationResponse(
        request_id=f"r{n}", user_id=user, status="ok", model_version="v1", served_at=at,
        items=[ScoredItem(item_id=i, score=1.0) for i in items],
    )


def interaction(n: int, user: str, item: str, kind: EventType, at: float) -> InteractionEvent:
    return InteractionEvent(
        event_id=f"e{n}", user_id=user, session_id=f"s-{user}", item_id=item, event_type=kind,
        timestamp=at,
    )


@pytest.fixture
def settings(kafka: KafkaConnection) -> MonitorSettings:
    return MonitorSettings(
        kafka=kafka,
        group_id=f"monitor-{uuid.uuid4().hex[:8]}",
        metrics_port=0,
        k=3,
        window_s=WINDOW_S,
        attribution_window_s=ATTRIBUTION_S,
        allowed_lateness_s=0.0,
        idle_advance_s=86_400.0,  # only event time moves the watermark in these tests
        poll_timeout_s=0.2,
        drift=DriftSettings(kpi_metrics=("hit_rate",)),
    )


@pytest.fixture
def running(settings: MonitorSettings) -> Iterator[MonitorService]:
    service = MonitorService(settings)
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    yield service
    stop.set()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the monitor did not stop"


def publish(
    kafka: KafkaConnection, records: list[RecommendationResponse | InteractionEvent]
) -> None:
    producer = EventProducer(kafka)
    for record in records:
        spec = REC_RESPONSES if isinstance(record, RecommendationResponse) else INTERACTIONS
        producer.send(kafka.topic(spec), record.user_id, record)
    producer.flush()


def read_until(kafka: KafkaConnection, topic: str, model: type[R], want: int) -> list[R]:
    consumer = Consumer({
        **kafka.client_config(), "group.id": f"reader-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    found: list[R] = []
    deadline = time.monotonic() + GIVE_UP_S
    try:
        while len(found) < want and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                found.append(decode(model, message.value()))
    finally:
        consumer.close()
    return found


def watermark_pusher(at: float) -> RecommendationResponse:
    """A record far ahead in event time, so every earlier window closes."""
    return response(999_999, "pusher", at)


def test_responses_and_later_interactions_become_kpi_reports_with_the_right_counts(
    kafka: KafkaConnection, settings: MonitorSettings, running: MonitorService
) -> None:
    records: list[RecommendationResponse | InteractionEvent] = [
        response(1, "u1", T0 + 1), response(2, "u2", T0 + 2),
        response(3, "u3", T0 + 3), response(4, "u4", T0 + 4),
        interaction(1, "u1", "b", EventType.CLICK, T0 + 10),
        interaction(2, "u2", "c", EventType.PURCHASE, T0 + 20),
        interaction(3, "u3", "a", EventType.VIEW, T0 + 30),  # a view is not a hit
        interaction(4, "u4", "zz", EventType.CLICK, T0 + 40),  # not a recommended item
        interaction(5, "u1", "a", EventType.CLICK, T0 + ATTRIBUTION_S + 5),  # too late
        # The next window, closed by the pusher too.
        response(5, "u5", T0 + WINDOW_S + 1),
        interaction(6, "u5", "a", EventType.ADD_TO_CART, T0 + WINDOW_S + 2),
        watermark_pusher(T0 + 10 * WINDOW_S),
    ]
    publish(kafka, records)
    reports = read_until(kafka, kafka.topic(KPI_METRICS), KpiReport, want=2)
    got = sorted((r.window_start, r.responses, r.hits, r.clicks, r.conversions) for r in reports)
    assert got == [(T0, 4, 2, 1, 1), (T0 + WINDOW_S, 1, 1, 0, 0)]
    assert all(r.model_version == "v1" and r.k == 3 for r in reports)
    assert reports[0].hit_rate_at_k == 0.5 if reports[0].window_start == T0 else True


def committed(settings: MonitorSettings, topic: str) -> dict[int, int]:
    consumer = Consumer({**settings.kafka.client_config(), "group.id": settings.group_id})
    try:
        partitions = [TopicPartition(topic, p) for p in range(REC_RESPONSES.partitions)]
        return {tp.partition: tp.offset for tp in consumer.committed(partitions, timeout=10)}
    finally:
        consumer.close()


def test_a_kpi_drop_becomes_a_drift_alert_and_offsets_stop_at_pending_state(
    kafka: KafkaConnection, settings: MonitorSettings, running: MonitorService
) -> None:
    rng = random.Random(7)
    records: list[RecommendationResponse | InteractionEvent] = []
    for n in range(9_000):
        at, user, p_hit = T0 + n * 2.0, f"u{n}", 0.30 if n < 6_000 else 0.10
        records.append(response(n, user, at))
        if rng.random() < p_hit:
            records.append(interaction(n, user, "b", EventType.CLICK, at + 5))
    records.append(watermark_pusher(T0 + 9_000 * 2.0 + 10 * WINDOW_S))
    publish(kafka, records)
    [alert] = read_until(kafka, kafka.topic(ALERTS_DRIFT), DriftAlert, want=1)
    assert (alert.detector, alert.metric, alert.suggested_action) == (
        "kpi.hit_rate", "hit_rate", "retrain"
    )
    assert alert.baseline > 0.25 and alert.current < 0.15
    assert alert.detected_at >= T0 + 6_000 * 2.0
    # The pusher still waits for attribution, so its partition is not committed past it.
    reports = read_until(kafka, kafka.topic(KPI_METRICS), KpiReport, want=60)
    assert sum(r.responses for r in reports) == 9_000
    offsets = committed(settings, kafka.topic(REC_RESPONSES))
    assert sum(max(o, 0) for o in offsets.values()) < 9_001
