"""The monitor on the real Kafka: responses and later interactions in, KPIs and alerts out."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import msgpack
import numpy as np
import pytest
from confluent_kafka import Consumer, TopicPartition
from pydantic import BaseModel

from schemas.alerts import DriftAlert
from schemas.deadletter import DeadLetter
from schemas.events import EventContext, EventType, InteractionEvent
from schemas.kpi import KpiReport, user_bucket
from schemas.limits import USER_BUCKETS
from schemas.ranker_examples import RankerExample, ServedFeatures, encode_vectors
from schemas.recommendations import RecommendationResponse, ResponseError, ScoredItem
from schemas.topics import (
    ALERTS_DRIFT,
    INTERACTIONS,
    KPI_METRICS,
    MONITOR_STATE,
    RANKER_EXAMPLES,
    REC_FEATURES,
    REC_RESPONSES,
)
from schemas.wire import decode
from streams.kafka import faust_app
from streams.kafka.admin import delete_topics, end_offsets
from streams.kafka.connection import KafkaConnection
from streams.kafka.principals import MONITOR
from streams.kafka.producer import EventProducer
from streams.monitor.drift.config import DriftSettings
from streams.monitor.service import MonitorService
from streams.monitor.settings import MonitorSettings
from tests.hostile_corpus import corpus

R = TypeVar("R", bound=BaseModel)
Record = RecommendationResponse | InteractionEvent | ServedFeatures
WINDOW_S = 300.0
ATTRIBUTION_S = 60.0
# Far enough in the past that a whole simulated day fits before now; aligned to a window.
T0 = (time.time() // WINDOW_S) * WINDOW_S - 30_000.0
PUSHERS = 64  # users enough that every partition gets one (P(miss) ~ 4 * 0.75**64)
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


def served_features(
    request_id: str, user: str, at: float, candidates: tuple[str, ...] = ("a", "b", "c", "d"),
    shown: tuple[str, ...] = ("a", "b", "c"),
) -> ServedFeatures:
    rows = np.arange(2 * len(candidates), dtype=np.float32).reshape(-1, 2)
    return ServedFeatures(
        request_id=request_id, user_id=user, served_at=at, features_at=at, model_version="v1",
        feature_set="test-set", n_features=2, candidates=list(candidates),
        vectors=encode_vectors(rows), strategy="retrieval_order", shown=list(shown),
    )


def watermark_pushers(at: float) -> list[Record]:
    """Records at `at` on every partition of the three topics (the watermark is the minimum
    over partitions) that count for nothing themselves: error answers, views and logged
    features of other users."""
    users = [f"pusher{i}" for i in range(PUSHERS)]
    failed = ResponseError(code="overloaded", message="busy")
    return [
        *(RecommendationResponse(request_id=f"p{at}-{u}", user_id=u, status="error",
                                 served_at=at, error=failed) for u in users),
        *(interaction(i, u, "zz", EventType.VIEW, at) for i, u in enumerate(users)),
        *(served_features(f"p{at}-{u}", u, at, shown=()) for u in users),
    ]


@pytest.fixture(autouse=True)
def _topics_removed(kafka: KafkaConnection) -> Iterator[None]:
    """The catalog's topics under this test's prefix, the monitor's state changelog included,
    go with the test."""
    yield
    delete_topics(kafka)


@pytest.fixture
def settings(kafka: KafkaConnection) -> MonitorSettings:
    return MonitorSettings(
        kafka=kafka.as_principal(MONITOR),
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


@contextmanager
def monitoring(settings: MonitorSettings) -> Iterator[MonitorService]:
    service = MonitorService(settings)
    stop = threading.Event()
    failures: list[BaseException] = []

    def run() -> None:
        try:
            service.run(stop)
        except BaseException as exc:
            failures.append(exc)
            raise

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield service
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not thread.is_alive(), "the monitor did not stop"
    assert failures == [], f"the monitor failed: {failures!r}"


def publish(kafka: KafkaConnection, records: list[Record]) -> None:
    producer = EventProducer(kafka)
    for record in records:
        spec = (
            REC_RESPONSES if isinstance(record, RecommendationResponse)
            else REC_FEATURES if isinstance(record, ServedFeatures) else INTERACTIONS
        )
        producer.send(kafka.topic(spec), record.user_id, record)
    producer.close()


def read_until(
    kafka: KafkaConnection, topic: str, model: type[R], done: Callable[[list[R]], bool]
) -> list[R]:
    """Everything on `topic` (one partition: in order) up to the point where `done` holds."""
    consumer = Consumer({
        **kafka.client_config(), "group.id": f"reader-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    found: list[R] = []
    deadline = time.monotonic() + GIVE_UP_S
    try:
        while not done(found) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                found.append(decode(model, message.value()))
    finally:
        consumer.close()
    return found


def state_rows(kafka: KafkaConnection) -> dict[bytes, bytes]:
    """The monitor's state table as its changelog holds it now (tombstones applied)."""
    topic = kafka.topic(MONITOR_STATE)
    ends = end_offsets(kafka, topic)
    consumer = Consumer({
        **kafka.client_config(), "group.id": f"reader-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
    })
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    rows: dict[bytes, bytes] = {}
    seen = dict.fromkeys(ends, 0)
    deadline = time.monotonic() + GIVE_UP_S
    try:
        while any(seen[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            partition, offset, key = message.partition(), message.offset(), message.key()
            assert partition is not None and offset is not None and key is not None
            seen[partition] = offset + 1
            value = message.value()
            if value is None:
                rows.pop(key, None)
            else:
                rows[key] = value
    finally:
        consumer.close()
    return rows


def test_responses_and_later_interactions_become_kpi_reports_with_the_right_counts(
    kafka: KafkaConnection, settings: MonitorSettings
) -> None:
    records: list[Record] = [
        response(1, "u1", T0 + 1), response(2, "u2", T0 + 2),
        response(3, "u3", T0 + 3), response(4, "u4", T0 + 4),
        interaction(1, "u1", "b", EventType.CLICK, T0 + 10),
        interaction(2, "u2", "c", EventType.PURCHASE, T0 + 20),
        interaction(3, "u3", "a", EventType.VIEW, T0 + 30),  # a view is not a hit
        interaction(4, "u4", "zz", EventType.CLICK, T0 + 40),  # not a recommended item
        interaction(5, "u3", "a", EventType.CLICK, T0 + 3 + ATTRIBUTION_S + 1),  # too late
        response(5, "u5", T0 + WINDOW_S + 1),
        interaction(6, "u5", "a", EventType.ADD_TO_CART, T0 + WINDOW_S + 2),
        *watermark_pushers(T0 + 10 * WINDOW_S),
    ]
    with monitoring(settings) as service:
        # Before the pushers: consumed before the windows close, whatever the partition.
        garbage = EventProducer(kafka)
        garbage.send_raw(kafka.topic(REC_RESPONSES), b"u9", b"{not json")
        garbage.flush()
        publish(kafka, records)
        reports = read_until(kafka, kafka.topic(KPI_METRICS), KpiReport, lambda r: len(r) >= 2)
        invalid = service.metrics.registry.get_sample_value(
            "streamrec_monitor_records_total",
            {"topic": kafka.topic(REC_RESPONSES), "outcome": "invalid"},
        )
    got = sorted((r.window_start, r.responses, r.hits, r.clicks, r.conversions) for r in reports)
    assert got == [(T0, 4, 2, 1, 1), (T0 + WINDOW_S, 1, 1, 0, 0)]
    assert all(r.model_version == "v1" and r.k == 3 for r in reports)
    first = min(reports, key=lambda r: r.window_start)
    assert (first.hit_rate_at_k, first.ctr, first.conversion_rate) == (0.5, 0.25, 0.25)
    assert invalid == 1.0  # skipped and counted; the monitor kept going


def test_logged_features_and_later_interactions_become_graded_ranker_examples(
    kafka: KafkaConnection, settings: MonitorSettings
) -> None:
    records: list[Record] = [
        response(1, "u1", T0 + 1), served_features("r1", "u1", T0 + 1),
        response(2, "u2", T0 + 2), served_features("r2", "u2", T0 + 2),
        interaction(1, "u1", "b", EventType.CLICK, T0 + 10),
        interaction(2, "u1", "b", EventType.PURCHASE, T0 + 11),
        interaction(3, "u2", "d", EventType.CLICK, T0 + 12),  # logged, not shown: a label too
        interaction(4, "u2", "a", EventType.CLICK, T0 + 2 + ATTRIBUTION_S + 1),  # too late
        *watermark_pushers(T0 + 10 * WINDOW_S),
    ]
    with monitoring(settings) as service:
        garbage = EventProducer(kafka)
        garbage.send_raw(kafka.topic(REC_FEATURES), b"u9", b"{not json")
        garbage.flush()
        publish(kafka, records)
        examples = read_until(
            kafka, kafka.topic(RANKER_EXAMPLES), RankerExample,
            lambda e: {"r1", "r2"} <= {x.request_id for x in e},
        )
        letters = read_until(
            kafka, f"{kafka.topic(REC_FEATURES)}.dlq", DeadLetter, lambda d: len(d) >= 1
        )
        assert service.dead_letters.written == 1
    by_request = {e.request_id: e for e in examples if e.user_id in ("u1", "u2")}
    assert set(by_request) == {"r1", "r2"}
    assert by_request["r1"].candidates == ["a", "b", "c", "d"]
    assert by_request["r1"].grades == [0, 3, 0, 0]
    assert by_request["r2"].grades == [0, 0, 0, 1]
    matrix, _ = by_request["r1"].graded()
    np.testing.assert_array_equal(matrix, [[0, 1], [2, 3], [4, 5], [6, 7]])
    [letter] = letters
    assert letter.original_value == b"{not json" and letter.service == "monitor"


def test_a_kpi_drop_becomes_a_drift_alert(
    kafka: KafkaConnection, settings: MonitorSettings
) -> None:
    rng = random.Random(7)
    records: list[Record] = []
    for n in range(9_000):
        at, user, p_hit = T0 + n * 2.0, f"u{n}", 0.30 if n < 6_000 else 0.10
        records.append(response(n, user, at))
        if rng.random() < p_hit:
            records.append(interaction(n, user, "b", EventType.CLICK, at + 5))
    records += watermark_pushers(T0 + 9_000 * 2.0 + 10 * WINDOW_S)
    with monitoring(settings):
        publish(kafka, records)
        alerts = read_until(kafka, kafka.topic(ALERTS_DRIFT), DriftAlert, lambda a: len(a) >= 1)
        reports = read_until(
            kafka, kafka.topic(KPI_METRICS), KpiReport,
            lambda r: sum(x.responses for x in r) >= 9_000,
        )
    [alert] = alerts
    assert (alert.detector, alert.metric, alert.suggested_action, alert.model_version) == (
        "kpi.hit_rate", "hit_rate", "retrain", "v1"
    )
    assert alert.baseline > 0.25 and alert.current < 0.15
    assert alert.detected_at >= T0 + 6_000 * 2.0
    assert sum(r.responses for r in reports) == 9_000


def test_a_restarted_monitor_finishes_open_windows_without_reporting_closed_ones_again(
    kafka: KafkaConnection, settings: MonitorSettings
) -> None:
    window_a, window_b = T0, T0 + WINDOW_S
    before_stop: list[Record] = [
        response(1, "u1", window_a + 1), response(2, "u2", window_a + 2),
        interaction(1, "u1", "a", EventType.CLICK, window_a + 5),
        response(5, "u5", window_b + 1),
        interaction(5, "u5", "b", EventType.CLICK, window_b + 10),
        response(6, "u6", window_b + 40),  # still awaiting attribution at the stop
        response(7, "u7", window_b + 50),
        # Closes window A (ends + attribution <= here) but not window B.
        *watermark_pushers(window_b + ATTRIBUTION_S + 30),
    ]
    with monitoring(settings):
        publish(kafka, before_stop)
        first = read_until(kafka, kafka.topic(KPI_METRICS), KpiReport, lambda r: len(r) >= 1)
    assert [(r.window_start, r.responses, r.hits) for r in first] == [(window_a, 2, 1)]
    # The state table remembers that window A (and only A) was reported, and that responses
    # 6 and 7 are still open.
    rows = state_rows(kafka)
    bounds = {json.loads(v)["reported_through"] for k, v in rows.items() if k.startswith(b"c")}
    assert bounds and all(window_b <= b < window_b + WINDOW_S for b in bounds)
    kept = {
        decode(RecommendationResponse, raw).request_id
        for key, value in rows.items() if key.startswith(b"s")
        for kind, raw in msgpack.unpackb(value) if kind == "r"
    }
    assert {"r6", "r7"} <= kept

    after_stop: list[Record] = [
        interaction(6, "u6", "c", EventType.PURCHASE, window_b + 95),
        *watermark_pushers(T0 + 10 * WINDOW_S),
    ]
    publish(kafka, after_stop)
    with monitoring(settings):
        reports = read_until(
            kafka, kafka.topic(KPI_METRICS), KpiReport,
            lambda r: any(x.window_start == window_b for x in r),
        )
    got = [(r.window_start, r.responses, r.hits, r.conversions) for r in reports]
    assert got == [(window_a, 2, 1, 0), (window_b, 3, 2, 1)]


@pytest.mark.parametrize("stop_returns", [True, False], ids=["stopped", "stop-never-returns"])
def test_a_crashed_stream_app_is_replaced_and_finishes_its_windows_without_reporting_twice(
    kafka: KafkaConnection, settings: MonitorSettings, monkeypatch: pytest.MonkeyPatch,
    stop_returns: bool,
) -> None:
    """faust stops an app whose commit or send failed (a broker outage); the monitor builds a
    new one, which goes on from the committed offsets and the state table. A crashed app whose
    stop never returns is abandoned."""
    monkeypatch.setattr(faust_app, "_STOP_AT_MOST_S", 3.0)
    window_a, window_b = T0, T0 + WINDOW_S
    with monitoring(settings) as service:
        publish(kafka, [
            response(1, "u1", window_a + 1), response(2, "u2", window_a + 2),
            interaction(1, "u1", "a", EventType.CLICK, window_a + 5),
            response(6, "u6", window_b + 40),  # still awaiting attribution at the crash
            *watermark_pushers(window_b + ATTRIBUTION_S + 30),
        ])
        first = read_until(kafka, kafka.topic(KPI_METRICS), KpiReport, lambda r: len(r) >= 1)
        crashed = service.sender.app
        assert crashed is not None
        if not stop_returns:  # as when its last commit waits on a producer flush that never ends
            crashed.consumer.wait_empty = asyncio.Event().wait  # type: ignore[method-assign, assignment]
        asyncio.run_coroutine_threadsafe(crashed.crash(RuntimeError("injected")), crashed.loop)
        deadline = time.monotonic() + GIVE_UP_S
        while service.sender.app is crashed and time.monotonic() < deadline:
            time.sleep(0.2)
        publish(kafka, [
            interaction(6, "u6", "c", EventType.PURCHASE, window_b + 95),
            *watermark_pushers(T0 + 10 * WINDOW_S),
        ])
        reports = read_until(
            kafka, kafka.topic(KPI_METRICS), KpiReport,
            lambda r: any(x.window_start == window_b for x in r),
        )
        restarts = service.metrics.registry.get_sample_value(
            "streamrec_monitor_app_restarts_total", {"reason": "RuntimeError"}
        )
    assert [(r.window_start, r.responses, r.hits) for r in first] == [(window_a, 2, 1)]
    got = [(r.window_start, r.responses, r.hits, r.conversions) for r in reports]
    assert got == [(window_a, 2, 1, 0), (window_b, 1, 1, 1)]
    assert restarts == 1.0


def test_partitions_never_committed_are_read_again_from_their_start_after_a_seek_back(
    kafka: KafkaConnection, settings: MonitorSettings
) -> None:
    """faust seeks back to the committed offsets after each recovery, having dropped what it
    fetched while the recovery ran. A partition with no committed offset yet goes back to its
    first record, not to where the dropped fetches left it."""
    records = [response(1, "u1", T0 + 1), *watermark_pushers(T0 + WINDOW_S + ATTRIBUTION_S + 30)]
    uncommitted = settings.model_copy(update={"commit_interval_s": 60.0})
    with monitoring(uncommitted) as service:
        publish(kafka, records)
        read_until(kafka, kafka.topic(KPI_METRICS), KpiReport, lambda r: len(r) >= 1)
        app = service.sender.app
        assert app is not None and service.counters.consumed == len(records)
        asyncio.run_coroutine_threadsafe(app.consumer.perform_seek(), app.loop).result(GIVE_UP_S)
        deadline = time.monotonic() + GIVE_UP_S
        while service.counters.consumed < 2 * len(records) and time.monotonic() < deadline:
            time.sleep(0.2)
        consumed = service.counters.consumed
    assert consumed == 2 * len(records)


def test_hostile_records_on_both_topics_are_skipped_and_counted_while_the_monitor_goes_on(
    kafka: KafkaConnection, settings: MonitorSettings
) -> None:
    hostile = corpus(INTERACTIONS.name)
    topics = (kafka.topic(INTERACTIONS), kafka.topic(REC_RESPONSES))
    with monitoring(settings) as service:
        producer = EventProducer(kafka)
        for topic in topics:
            for record in hostile:
                producer.send_raw(topic, record.key, record.value, record.headers)
        producer.flush()

        def invalid(topic: str) -> float:
            value = service.metrics.registry.get_sample_value(
                "streamrec_monitor_records_total", {"topic": topic, "outcome": "invalid"}
            )
            return value or 0.0

        deadline = time.monotonic() + GIVE_UP_S
        while any(invalid(t) < len(hostile) for t in topics) and time.monotonic() < deadline:
            time.sleep(0.2)
    # Every one was skipped, an event an hour ahead included: none moved event time forward.
    assert [invalid(t) for t in topics] == [len(hostile)] * 2


def test_each_experiment_arm_gets_its_own_kpi_reports_equal_to_a_recount(
    kafka: KafkaConnection, settings: MonitorSettings
) -> None:
    rng = random.Random(11)
    arms = ("popularity", "frozen", "model", "ranker")
    records: list[Record] = []
    responses: list[RecommendationResponse] = []
    clicks: dict[str, tuple[str, float]] = {}
    for n in range(240):
        user, at = f"x{n % 60}", T0 + rng.uniform(0, 3 * WINDOW_S - ATTRIBUTION_S)
        arm = arms[n % 60 % 4]
        shown = tuple(rng.sample("abcdef", 3))
        answer = RecommendationResponse(
            request_id=f"q{n}", user_id=user, status="ok", served_at=at,
            model_version="v1" if arm == "frozen" else "v2", experiment="exp", arm=arm,
            items=[ScoredItem(item_id=i, score=1.0) for i in shown],
        )
        responses.append(answer)
        if rng.random() < 0.6:  # the user picks something within or after the window
            item, when = rng.choice("abcdef"), at + rng.uniform(0, 1.5 * ATTRIBUTION_S)
            clicks[answer.request_id] = (item, when)
            records.append(InteractionEvent(
                event_id=f"c{n}", user_id=user, session_id=f"s-{user}", item_id=item,
                event_type=EventType.CLICK, timestamp=when,
                context=EventContext(source="recommendation", request_id=answer.request_id),
            ))
    # Each topic in event time: the monitor counts a record behind its watermark as late.
    records = sorted(records, key=lambda r: r.timestamp if isinstance(r, InteractionEvent) else 0)
    records += [*sorted(responses, key=lambda r: r.served_at),
                *watermark_pushers(T0 + 10 * WINDOW_S)]
    # The recount: a response is a hit when the click naming it is on one of its items within
    # the attribution window; one row per window, model version and arm.
    expected: dict[tuple[float, str, str], list[int]] = {}
    for answer in responses:
        start = (answer.served_at // WINDOW_S) * WINDOW_S
        row = expected.setdefault((start, answer.model_version or "", answer.arm or ""), [0, 0])
        item, when = clicks.get(answer.request_id, ("", -1.0))
        listed = {i.item_id for i in answer.items}
        row[0] += 1
        row[1] += item in listed and answer.served_at <= when <= answer.served_at + ATTRIBUTION_S
    with monitoring(settings):
        publish(kafka, records)
        reports = read_until(kafka, kafka.topic(KPI_METRICS), KpiReport,
                             lambda r: len(r) >= len(expected))
    got = {(r.window_start, r.model_version, r.arm or ""): [r.responses, r.hits] for r in reports}
    assert got == expected
    assert all(r.experiment == "exp" for r in reports)


def test_each_arms_kpis_equal_an_independent_recount_of_the_same_records(
    kafka: KafkaConnection, settings: MonitorSettings
) -> None:
    rng = random.Random(43)
    responses: list[RecommendationResponse] = []
    acts: list[InteractionEvent] = []
    items = [f"i{n}" for n in range(12)]
    for n in range(600):
        user, at = f"u{n % 150}", T0 + n * 3.0
        shown = tuple(rng.sample(items, 5))
        arm = ("model", "popularity", "ranker")[rng.randrange(3)]
        responses.append(response(n, user, at, shown).model_copy(
            update={"experiment": "exp1", "arm": arm}))
        for j in range(rng.randrange(3)):
            kind = rng.choice([EventType.VIEW, EventType.CLICK, EventType.ADD_TO_CART,
                               EventType.PURCHASE])
            event = interaction(10 * n + j, user, rng.choice(items), kind,
                                at + rng.uniform(0.0, 1.5 * ATTRIBUTION_S))
            if rng.random() < 0.1:  # names a request: this one or another
                named = f"r{rng.choice([n, max(0, n - 1)])}"
                event = event.model_copy(update={"context": EventContext(request_id=named)})
            acts.append(event)
    # The acts are produced out of event-time order: a lateness beyond their spread keeps every
    # one of them in time for its answers, as the recount assumes.
    with monitoring(settings.model_copy(update={"allowed_lateness_s": 2 * ATTRIBUTION_S})):
        publish(kafka, [*responses, *acts, *watermark_pushers(T0 + 10 * WINDOW_S)])
        reports = read_until(
            kafka, kafka.topic(KPI_METRICS), KpiReport,
            lambda r: sum(x.responses for x in r) >= len(responses),
        )
    monitor: dict[str, list[int]] = {}
    for report in reports:
        assert report.experiment == "exp1" and report.arm is not None
        got = monitor.setdefault(report.arm, [0] * (4 + 2 * USER_BUCKETS))
        counts = [report.responses, report.hits, report.clicks, report.conversions,
                  *report.bucket_responses, *report.bucket_hits]
        for index, value in enumerate(counts):
            got[index] += value
    expected = recount(responses, acts, k=3)
    assert monitor == expected
    assert all(sum(1 for n in row[4:4 + USER_BUCKETS] if n) > 10 for row in expected.values())


def recount(
    responses: list[RecommendationResponse], events: list[InteractionEvent], k: int
) -> dict[str, list[int]]:
    """Per arm: responses, hits, clicks and conversions, then responses and hits per user
    bucket (schemas.kpi.user_bucket), counted straight from the records (docs/architecture.md,
    "What a hit is"): an act on a top-k item within the attribution window credits the answer
    it names, or, naming none, the user's latest answer it matches."""
    choices = [e for e in events if e.event_type != EventType.VIEW]
    credited: dict[str, list[InteractionEvent]] = {}
    for e in choices:
        named = e.context.request_id if e.context else None
        matching = [
            r for r in responses
            if r.user_id == e.user_id and e.item_id in [i.item_id for i in r.items][:k]
            and r.served_at <= e.timestamp <= r.served_at + ATTRIBUTION_S
            and named in (None, r.request_id)
        ]
        if matching:
            target = max(matching, key=lambda r: r.served_at)
            credited.setdefault(target.request_id, []).append(e)
    out: dict[str, list[int]] = {}
    for r in responses:
        assert r.arm is not None
        mine = credited.get(r.request_id, [])
        row = out.setdefault(r.arm, [0] * (4 + 2 * USER_BUCKETS))
        row[0] += 1
        row[1] += bool(mine)
        row[4 + user_bucket(r.user_id)] += 1
        row[4 + USER_BUCKETS + user_bucket(r.user_id)] += bool(mine)
        row[2] += any(e.event_type == EventType.CLICK for e in mine)
        row[3] += any(e.event_type == EventType.PURCHASE for e in mine)
    return out
