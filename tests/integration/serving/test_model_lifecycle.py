"""Hot swap under load and canary decisions, on the real Kafka and Redis."""

from __future__ import annotations

import gc
import threading
import time
import uuid
from pathlib import Path

import pytest

from models.retrieval import RetrievalConfig
from schemas.kpi import KpiReport
from schemas.model_updates import ModelUpdate
from schemas.topics import KPI_METRICS, MODEL_UPDATES, REC_REQUESTS
from schemas.wire import decode
from serving.model_bundle import ModelBundle
from serving.service import ScorerService
from serving.session_model import load_session_bundle
from serving.settings import CanaryPolicy
from streams.kafka.connection import KafkaConnection
from streams.kafka.producer import EventProducer
from streams.pacing import Pacer
from streams.redis.connection import RedisConnection
from tests.integration.kafka_helpers import read_all
from tests.integration.serving.helpers import (
    MODEL,
    FeatureFeed,
    events,
    model_update,
    publish,
    request,
    responses,
    running,
    save_model,
    send_requests,
    serving_version,
    settings,
    wait_for,
)
from tests.kpi_buckets import spread

pytestmark = pytest.mark.e2e
USERS = [f"user{n}" for n in range(40)]


def test_a_model_swap_under_load_drops_no_request(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    scorer_redis_connection: RedisConnection,
    tmp_path: Path,
) -> None:
    FeatureFeed(kafka, redis_connection).ingest(
        [e for n, u in enumerate(USERS) for e in events(u, [f"i{n}", f"i{n + 50}"])]
    )
    first, second = save_model(tmp_path, "1.0", seed=1), save_model(tmp_path, "1.1", seed=2)
    publish(kafka, model_update(first, "1.0"))
    service = ScorerService(settings(kafka, scorer_redis_connection, tmp_path))
    sent: list[str] = []
    with running(service):
        assert wait_for(lambda: serving_version(service) == "1.0")
        swapped = threading.Event()

        def load() -> None:
            # Open loop at 100 requests/s, until 100 more requests went out after the swap.
            pacer, after_swap = Pacer(100.0), 0
            producer = EventProducer(kafka, **{"linger.ms": 0})
            while after_swap < 100:
                pacer.wait()
                r = request(USERS[len(sent) % len(USERS)])
                producer.send(kafka.topic(REC_REQUESTS), r.user_id, r)
                sent.append(r.request_id)
                if swapped.is_set():
                    after_swap += 1
            producer.flush()

        generator = threading.Thread(target=load)
        generator.start()
        wait_for(lambda: len(sent) >= 100)
        publish(kafka, model_update(second, "1.1"))
        assert wait_for(lambda: serving_version(service) == "1.1")
        swapped.set()
        generator.join(timeout=120)
        answered = responses(kafka, len(sent))
    assert sorted(r.request_id for r in answered) == sorted(sent)
    assert all(r.status == "ok" for r in answered)
    assert {r.model_version for r in answered} == {"1.0", "1.1"}
    assert service.registry.swaps >= 2


def test_what_a_model_load_leaves_behind_is_kept_out_of_the_cycle_collectors_walks(
    kafka: KafkaConnection, scorer_redis_connection: RedisConnection, tmp_path: Path
) -> None:
    # Stands for what a load brings that lives on: the modules it imports, its tables.
    left_behind: list[list[int]] = []

    def load(update: ModelUpdate) -> ModelBundle:
        left_behind.extend([n] for n in range(1000))
        return load_session_bundle(
            tmp_path, MODEL, update.version, update.sha256, RetrievalConfig(kind="flat"), 20
        )

    publish(kafka, model_update(save_model(tmp_path, "1.0"), "1.0"))
    service = ScorerService(settings(kafka, scorer_redis_connection, tmp_path), loader=load)
    with running(service):
        assert wait_for(lambda: serving_version(service) == "1.0")
        assert wait_for(lambda: not walked(left_behind), timeout_s=10.0)


def walked(objects: list[list[int]]) -> bool:
    """Whether any of `objects` is among those the cycle collector walks (not frozen)."""
    tracked = {id(o) for o in gc.get_objects()}
    return any(id(o) in tracked for o in objects)


def kpi(version: str, responses_: int, hit_rate: float) -> KpiReport:
    now = time.time()
    hits = round(responses_ * hit_rate)
    return KpiReport(
        report_id=uuid.uuid4().hex, model_version=version,
        window_start=now, window_end=now + 1, k=10,
        responses=responses_, hits=hits, clicks=hits, conversions=0,
        hit_rate_at_k=hit_rate, ctr=hit_rate, conversion_rate=0.0,
        **spread(responses_, hits),
    )


def send_kpis(kafka: KafkaConnection, reports: list[KpiReport]) -> None:
    producer = EventProducer(kafka)
    for report in reports:
        producer.send(kafka.topic(KPI_METRICS), report.model_version, report)
    producer.flush()


def canary_version(service: ScorerService) -> str | None:
    canary = service.registry.snapshot().canary
    return canary.version if canary else None


def decisions(kafka: KafkaConnection, expected: int) -> list[ModelUpdate]:
    records = read_all(kafka, kafka.topic(MODEL_UPDATES), expected)
    updates = [decode(ModelUpdate, m.value()) for m in records]
    return [u for u in updates if u.note.startswith("canary")]


def test_a_degraded_candidate_is_rolled_back_and_a_better_one_promoted(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    scorer_redis_connection: RedisConnection,
    tmp_path: Path,
) -> None:
    FeatureFeed(kafka, redis_connection).ingest(
        [e for n, u in enumerate(USERS) for e in events(u, [f"i{n}"])]
    )
    paths = {v: save_model(tmp_path, v, seed=n) for n, v in enumerate(("1.0", "1.1", "1.2"))}
    policy = CanaryPolicy(share=0.5, min_responses=300, max_regression=0.1, min_uplift=0.05)
    service = ScorerService(settings(kafka, scorer_redis_connection, tmp_path, canary=policy))
    publish(kafka, model_update(paths["1.0"], "1.0"))
    publish(kafka, model_update(paths["1.1"], "1.1", stage="candidate"))
    with running(service):
        assert wait_for(lambda: canary_version(service) == "1.1")
        send_requests(kafka, [request(u) for u in USERS])
        versions = {r.model_version: r.strategy for r in responses(kafka, len(USERS))}
        assert versions == {"1.0": "model", "1.1": "canary"}

        send_kpis(kafka, [kpi("1.0", 200, 0.30), kpi("1.1", 200, 0.12)])
        send_kpis(kafka, [kpi("1.0", 200, 0.30), kpi("1.1", 200, 0.12)])
        assert wait_for(lambda: canary_version(service) is None)
        assert serving_version(service) == "1.0"

        publish(kafka, model_update(paths["1.2"], "1.2", stage="candidate"))
        assert wait_for(lambda: canary_version(service) == "1.2")
        send_kpis(kafka, [kpi("1.0", 400, 0.30), kpi("1.2", 400, 0.40)])
        assert wait_for(lambda: serving_version(service) == "1.2")
        assert canary_version(service) is None

    emitted = decisions(kafka, 5)
    assert [(u.version, u.stage) for u in emitted] == [("1.1", "rolled_back"), ("1.2", "serving")]
    assert emitted[0].metrics["candidate_hit_rate_at_k"] == pytest.approx(0.12)
    assert service.metrics.canary_decisions.labels(action="rollback")._value.get() == 1
