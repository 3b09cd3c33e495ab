"""With the broker stopped for 30 s and then for 70 s, the trainer, the scorer and the monitor
wait and resume: every loop keeps running, and work sent after each outage is done.

A broker of its own (the session's would be pulled from under the other tests), on the jars the
session's stack already resolved.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest

from deploy.generators.sample import SampleConfig, SampleGenerator
from deploy.local.kafka import LocalKafka
from deploy.local.settings import LocalStackSettings
from deploy.local.stack import LocalStack
from deploy.local.worker_process import free_port
from online_trainer.service import TrainerService
from schemas.topics import INTERACTIONS
from serving.service import ScorerService
from streams.kafka.acls import grant_acls
from streams.kafka.admin import create_topics
from streams.kafka.connection import KafkaConnection
from streams.kafka.principals import MONITOR
from streams.kafka.producer import EventProducer
from streams.monitor.service import MonitorService
from streams.monitor.settings import MonitorSettings
from streams.redis.connection import RedisConnection
from tests.integration.online_trainer.conftest import train_settings
from tests.integration.serving.helpers import (
    model_update,
    publish,
    request,
    responses,
    save_model,
    send_requests,
)
from tests.integration.serving.helpers import settings as scorer_settings

pytestmark = [pytest.mark.chaos, pytest.mark.long]
OUTAGES_S = (30.0, 70.0)


@pytest.fixture
def own_kafka(stack: LocalStack, tmp_path: Path) -> Iterator[LocalKafka]:
    settings = LocalStackSettings(
        home=tmp_path / "stack", kafka_port=free_port(), kafka_controller_port=free_port(),
        kafka_tls_port=free_port(),
    )
    server = LocalKafka(settings)
    server.libs.parent.mkdir(parents=True)
    server.libs.symlink_to(stack.kafka.libs.resolve())
    server.start()
    try:
        server.wait_healthy(120)
        yield server
    finally:
        server.stop()


class Thread:
    def __init__(self, name: str, target: Callable[[threading.Event], None]) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=target, args=(self.stop,), name=name, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=120)


def _send_interactions(kafka: KafkaConnection, n: int, seed: int) -> None:
    producer = EventProducer(kafka)
    for event in SampleGenerator(SampleConfig(users=50, items=100, seed=seed)).events(n):
        producer.send(kafka.topic(INTERACTIONS), event.user_id, event)
    producer.close()


def _wait(predicate: Callable[[], bool], what: str, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _answered(kafka: KafkaConnection, request_id: str) -> bool:
    return any(r.request_id == request_id and r.status == "ok" for r in responses(kafka, 0, 2.0))


def _trained_past(trainer: TrainerService, batches: int) -> bool:
    return trainer.trainer.state.batches > batches


def _read_past(monitor: MonitorService, records: float) -> bool:
    return _monitor_records(monitor) >= records


def _monitor_records(monitor: MonitorService) -> float:
    return sum(
        sample.value
        for metric in monitor.metrics.records.collect()
        for sample in metric.samples
        if sample.name.endswith("_total")
    )


def test_services_wait_through_broker_outages_and_resume(
    own_kafka: LocalKafka,
    scorer_redis_connection: RedisConnection,
    tmp_path: Path,
) -> None:
    kafka = own_kafka.admin_connection().model_copy(
        update={"topic_prefix": f"o{uuid.uuid4().hex[:8]}."}
    )
    create_topics(kafka)
    grant_acls(kafka)
    store = tmp_path / "models"
    publish(kafka, model_update(save_model(store, "1.0"), "1.0"))
    scorer = ScorerService(scorer_settings(kafka, scorer_redis_connection, store))
    trainer = TrainerService(train_settings(kafka, tmp_path / "trainer"))
    monitor = MonitorService(
        MonitorSettings(
            kafka=kafka.as_principal(MONITOR), group_id=f"monitor-{kafka.topic_prefix}",
            metrics_port=0,
        )
    )
    scorer.start()
    threads = [Thread("trainer", trainer.run), Thread("monitor", monitor.run)]
    try:
        for round_, outage_s in enumerate((0.0, *OUTAGES_S)):
            if outage_s:
                own_kafka.stop()
                time.sleep(outage_s)
                own_kafka.start()
                own_kafka.wait_healthy(120)
            exited = [t.thread.name for t in threads if not t.thread.is_alive()]
            assert scorer.healthy() and not exited, (
                f"{exited or 'the scorer'} exited during the {outage_s:.0f} s outage"
            )
            trained, seen = trainer.trainer.state.batches, _monitor_records(monitor)
            _send_interactions(kafka, 300, seed=round_)
            asked = request("u1")
            send_requests(kafka, [asked])
            _wait(partial(_answered, kafka, asked.request_id), "the scorer to answer")
            _wait(partial(_trained_past, trainer, trained), "the trainer to train")
            _wait(partial(_read_past, monitor, seen + 300), "the monitor to read")
        ledger = trainer.trainer.state.ledger
        assert (ledger.overlaps, ledger.gaps) == (0, 0)  # nothing trained twice, nothing skipped
    finally:
        for thread in threads:
            thread.close()
        scorer.stop()
