"""Scorers started after any history of model.updates serve what the running ones serve, on the
real broker with compaction forced, and never answer with a version the log has rolled back or
bytes the store does not vouch for."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
import torch
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)
from hypothesis import HealthCheck, example, given, settings
from prometheus_client import CollectorRegistry

from deploy.local.stack import LocalStack
from models.session_checkpoint import session_manifest, session_tensors
from models.session_config import SessionTransformerConfig
from models.session_transformer import SessionTransformer
from models.store import ModelStore
from online_trainer.publisher import Publisher
from schemas.model_log import ModelLog
from schemas.model_updates import parse_update_key
from schemas.topics import MODEL_UPDATES
from serving.canary import Decision, decision_update
from serving.metrics import ServeMetrics
from serving.service import ScorerService
from streams.kafka.admin import end_offsets
from streams.kafka.catch_up import read_to_end
from streams.kafka.connection import KafkaConnection
from streams.kafka.principals import ADMIN, SCORER, TRAINER
from streams.kafka.producer import EventProducer
from streams.redis.connection import RedisConnection
from tests.integration.serving.helpers import (
    ITEMS,
    FeatureFeed,
    events,
    request,
    responses,
    running,
    send_requests,
    serving_version,
)
from tests.integration.serving.helpers import (
    settings as serve_settings,
)
from tests.model_oracle import ServingOracle, steps

pytestmark = pytest.mark.e2e
CONFIG = SessionTransformerConfig(dim=16, max_len=50, layers=1)
USERS = [f"user{n}" for n in range(10)]


class Control:
    """The trainer's publications and rollbacks (through its Publisher) and the canary's
    decisions (as a scorer sends them), each acting on what the log says, as they do."""

    def __init__(self, kafka: KafkaConnection, store: Path, model: str) -> None:
        self.model = model
        self.trainer = EventProducer(kafka.as_principal(TRAINER))
        self.scorer = EventProducer(kafka.as_principal(SCORER))
        self.topic = kafka.topic(MODEL_UPDATES)
        self.publisher = Publisher(ModelStore(store), self.trainer, kafka, model, 1.0)
        self.log = ModelLog()
        self.oracle = ServingOracle()
        torch.manual_seed(0)
        self.tensors = session_tensors(SessionTransformer(len(ITEMS), CONFIG))
        self.rows = {item: n + 1 for n, item in enumerate(ITEMS)}

    def step(self, name: str) -> None:
        state, oracle = self.log.state(self.model), self.oracle
        if name in ("publish", "candidate", "retrain", "retrain_candidate"):
            stage = "candidate" if name.endswith("candidate") else "serving"
            version = oracle.next_version(major=name.startswith("retrain"))
            self.publisher.stage = stage  # type: ignore[assignment]
            manifest = session_manifest(self.model, version, CONFIG, self.rows)
            publication = self.publisher.publish(version, self.tensors, None, manifest, None)
            self.log.apply(publication.update)
            self.publisher.retire(self.log, self.model)
            oracle.published(version, stage)
        elif name in ("promote", "canary_rollback") and state.candidate is not None:
            action: Literal["promote", "rollback"] = (
                "promote" if name == "promote" else "rollback"
            )
            decision = Decision(action, state.candidate.version, state.version or "-", 0.3, 0.2,
                                500, 500, "test")
            update = decision_update(decision, state.candidate, "hit_rate_at_k")
            self.scorer.send(self.topic, update.log_key, update)
            self.scorer.flush()
            self.log.apply(update)
            oracle.promoted() if action == "promote" else oracle.canary_rolled_back()
        elif name == "trainer_rollback" and len(state.serving) >= 2:
            self.log.apply(self.publisher.roll_back(state.serving[0], "kpi.hit_rate dropped"))
            oracle.trainer_rolled_back()

    def close(self) -> None:
        self.trainer.close()
        self.scorer.close()


@pytest.fixture(scope="module")
def compacting_broker(stack: LocalStack) -> None:
    """The log cleaner looks for dirty logs every second (15 s by default), so a test sees a
    compaction within seconds. A dynamic setting of the test stack's one broker."""
    s = stack.settings
    admin = AdminClient(
        KafkaConnection(
            bootstrap_servers=f"{s.host}:{s.kafka_port}", secrets_dir=s.secrets_dir.resolve(),
            sasl_username=ADMIN,
        ).client_config()
    )
    entry = ConfigEntry("log.cleaner.backoff.ms", "1000",
                        incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs(
        [ConfigResource("broker", "1", incremental_configs=[entry])]  # node.id of `up`'s broker
    ).values():
        future.result(timeout=30)


def _compact_quickly(kafka: KafkaConnection) -> None:
    """model.updates rolls a segment every 100 ms and is cleaned as soon as 1% of it is
    dirty: every record but the newest few is compacted within seconds."""
    admin = AdminClient(kafka.client_config())
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in (("segment.ms", "100"), ("min.cleanable.dirty.ratio", "0.01"))
    ]
    resource = ConfigResource("topic", kafka.topic(MODEL_UPDATES), incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def _keys_on_log(kafka: KafkaConnection, topic: str) -> list[bytes]:
    """The keys of every record the topic holds now, in log order."""
    ends = end_offsets(kafka, topic)
    consumer = Consumer({**kafka.client_config(), "group.id": f"keys-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    keys: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if message.error() is None:
                    keys.append(message.key() or b"")
            positions = consumer.position([TopicPartition(topic, p) for p in ends])
            if all(tp.offset >= ends[tp.partition] for tp in positions):
                return keys
    finally:
        consumer.close()
    raise TimeoutError(f"{topic} not read to its end")


def _wait_compacted(kafka: KafkaConnection, model: str) -> None:
    """Until the model's versions appear once each on the log: what a new scorer reads is the
    compacted log only. A record of another key rolls the segment the model's records are in
    (the active segment is never cleaned)."""
    producer = EventProducer(kafka)
    topic = kafka.topic(MODEL_UPDATES)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            time.sleep(0.2)
            producer.send_raw(topic, f"filler/{uuid.uuid4().int % 10**6}.0", None)
            producer.flush()
            keys = [k for k in _keys_on_log(kafka, topic) if k.startswith(f"{model}/".encode())]
            if len(keys) == len(set(keys)):
                return
    finally:
        producer.close()
    raise TimeoutError(f"model.updates not compacted for {model}")


def _scorer(
    kafka: KafkaConnection, scorer_redis: RedisConnection, store: Path, model: str
) -> ScorerService:
    base = serve_settings(kafka, scorer_redis, store, instance=uuid.uuid4().hex[:6])
    return ScorerService(
        base.model_copy(update={"model_name": model}), ServeMetrics(CollectorRegistry())
    )


def _state(service: ScorerService) -> tuple[str | None, str | None]:
    routing = service.registry.snapshot()
    return (serving_version(service), routing.canary.version if routing.canary else None)


@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(names=steps(8))
# Besides the random ones: a candidate outlived by a serving version and rolled back past, and a
# canary rollback, a promotion and a trainer's rollback in one history.
@example(names=["publish", "candidate", "publish", "trainer_rollback", "promote"])
@example(names=["publish", "retrain_candidate", "canary_rollback", "candidate", "promote",
                "trainer_rollback", "retrain"])
def test_a_scorer_started_on_the_compacted_log_serves_what_the_running_one_serves(
    names: list[str],
    kafka: KafkaConnection,
    scorer_redis_connection: RedisConnection,
    tmp_path: Path,
    compacting_broker: None,
) -> None:
    _compact_quickly(kafka)
    model = f"m{uuid.uuid4().hex[:8]}"
    store = tmp_path / model
    control = Control(kafka, store, model)
    live = _scorer(kafka, scorer_redis_connection, store, model)
    try:
        with running(live):
            for name in names:
                control.step(name)
            expected = (control.oracle.serving, control.oracle.candidate)
            topic = kafka.topic(MODEL_UPDATES)
            assert read_to_end(live.updates_loop, kafka, topic, 60)
            assert live.registry.wait_until_settled(60)
            assert _state(live) == expected, names
        _wait_compacted(kafka, model)
        fresh = _scorer(kafka, scorer_redis_connection, store, model)
        with running(fresh):  # start() reads the log to its end and loads before serving
            assert _state(fresh) == expected, names
    finally:
        control.close()


@pytest.fixture
def fed(kafka: KafkaConnection, redis_connection: RedisConnection) -> None:
    FeatureFeed(kafka, redis_connection).ingest(
        [e for n, u in enumerate(USERS) for e in events(u, [f"i{n}", f"i{n + 50}"])]
    )


def _answers(
    kafka: KafkaConnection, service: ScorerService, answered_before: int
) -> list[str | None]:
    """The model versions of answers to one request per user, sent before `service` starts
    (they wait in rec.requests: the scorer's first batch answers them)."""
    send_requests(kafka, [request(u) for u in USERS])
    with running(service):
        answered = responses(kafka, answered_before + len(USERS))
    return [r.model_version for r in answered[answered_before:]]


def test_a_canary_rollback_then_a_restart_serves_the_stable_version(
    kafka: KafkaConnection, scorer_redis_connection: RedisConnection, tmp_path: Path,
    compacting_broker: None, fed: None,
) -> None:
    _compact_quickly(kafka)
    model = f"m{uuid.uuid4().hex[:8]}"
    control = Control(kafka, tmp_path, model)
    try:
        for name in ("publish", "retrain", "candidate", "canary_rollback"):
            control.step(name)  # 1.0, 2.0 serving; 2.1 tried and rolled back by the canary
    finally:
        control.close()
    _wait_compacted(kafka, model)
    fresh = _scorer(kafka, scorer_redis_connection, tmp_path, model)
    assert _answers(kafka, fresh, 0) == ["2.0"] * len(USERS)


def test_restarted_scorers_never_answer_with_a_version_the_trainer_rolled_back(
    kafka: KafkaConnection, scorer_redis_connection: RedisConnection, tmp_path: Path, fed: None
) -> None:
    model = f"m{uuid.uuid4().hex[:8]}"
    control = Control(kafka, tmp_path, model)
    try:
        for name in ("publish", "retrain", "trainer_rollback"):
            control.step(name)  # 1.0, 2.0, then 2.0 taken out: the store's newest is 2.0
    finally:
        control.close()
    answered = 0
    for _ in range(4):
        versions = _answers(kafka, _scorer(kafka, scorer_redis_connection, tmp_path, model),
                            answered)
        answered += len(USERS)
        assert versions == ["1.0"] * len(USERS)


def _flip_a_bit(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 1
    path.write_bytes(bytes(raw))


@pytest.fixture
def littered_store(kafka: KafkaConnection, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """Versions 1.0 (intact), 2.0 (a bit flipped after its announcement) and 3.0 (a symlink to
    an intact version outside the store, announced with that version's digest), all announced
    as serving, and what interrupted writes and hands leave behind."""
    model = f"m{uuid.uuid4().hex[:8]}"
    store, outside = tmp_path / "store", tmp_path / "outside"
    control = Control(kafka, store, model)
    elsewhere = Control(kafka, outside, model)
    try:
        control.step("publish")
        control.step("retrain")
        elsewhere.oracle.last = (2, 0)
        elsewhere.step("retrain")  # 3.0, stored outside, announced on the same topic
    finally:
        control.close()
        elsewhere.close()
    folder = store / model
    _flip_a_bit(folder / "2.0" / "weights.safetensors")
    (folder / "3.0").symlink_to(outside / model / "3.0")
    (folder / ".4.0.tmp").mkdir()
    (folder / ".4.0.tmp" / "weights.safetensors").write_bytes(b"half")
    (folder / "5.0").mkdir()
    (folder / "6.0").mkdir()
    (folder / "6.0" / "weights.safetensors").write_bytes(b"no manifest")
    (folder / "latest").mkdir()
    (folder / "notes.txt").write_text("")
    yield store, model


def test_a_scorer_on_a_littered_store_serves_the_newest_version_its_announcement_vouches_for(
    kafka: KafkaConnection, scorer_redis_connection: RedisConnection,
    littered_store: tuple[Path, str], fed: None,
) -> None:
    store, model = littered_store
    fresh = _scorer(kafka, scorer_redis_connection, store, model)
    assert _answers(kafka, fresh, 0) == ["1.0"] * len(USERS)
    rejected = fresh.metrics.loads_rejected
    assert rejected.labels(model=model, reason="IntegrityError")._value.get() == 1
    assert rejected.labels(model=model, reason="OutsideStore")._value.get() == 1


def test_updates_under_another_versions_key_are_refused(
    kafka: KafkaConnection, scorer_redis_connection: RedisConnection, tmp_path: Path
) -> None:
    model = f"m{uuid.uuid4().hex[:8]}"
    control = Control(kafka, tmp_path, model)
    try:
        control.step("publish")
        control.step("publish")
        newest = control.log.state(model).serving[0]
        forged = newest.model_copy(update={"stage": "rolled_back"})
        control.trainer.send(control.topic, f"{model}/1.0", forged)  # 1.1's record, 1.0's key
        control.trainer.flush()
    finally:
        control.close()
    assert parse_update_key(f"{model}/1.0".encode()) == (model, "1.0")
    fresh = _scorer(kafka, scorer_redis_connection, tmp_path, model)
    with running(fresh):
        assert _state(fresh) == ("1.1", None)
        assert fresh.metrics.updates_refused._value.get() == 1
