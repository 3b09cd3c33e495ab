"""Shared set-up for the scorer's integration tests: a stored model, features, a running scorer."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch
from confluent_kafka import Message

from models.session_checkpoint import save_session_model
from models.session_config import SessionTransformerConfig
from models.session_transformer import SessionTransformer
from models.store import ModelStore
from schemas.events import EventContext, EventType, InteractionEvent
from schemas.model_updates import ModelUpdate
from schemas.recommendations import RecommendationRequest, RecommendationResponse
from schemas.topics import INTERACTIONS, MODEL_UPDATES, REC_REQUESTS, REC_RESPONSES
from schemas.wire import decode
from serving.service import ScorerService
from serving.settings import CanaryPolicy, ServeSettings
from streams.feature_worker.batch import PositionedEvent
from streams.feature_worker.writer import FeatureWriter
from streams.kafka.connection import KafkaConnection
from streams.kafka.principals import SCORER
from streams.kafka.producer import EventProducer
from streams.redis.connection import RedisConnection
from tests.integration.kafka_helpers import read_all

MODEL = "session"
ITEMS = [f"i{n}" for n in range(300)]


def category(item_id: str) -> str:
    return f"c{int(item_id[1:]) % 5}"


def save_model(root: Path, version: str, seed: int = 0) -> Path:
    torch.manual_seed(seed)
    model = SessionTransformer(len(ITEMS), SessionTransformerConfig(dim=16, max_len=50, layers=1))
    return save_session_model(ModelStore(root), MODEL, version, model, ITEMS)


def model_update(path: Path, version: str, stage: str = "serving") -> ModelUpdate:
    return ModelUpdate.model_validate(
        {"model_name": MODEL, "version": version, "kind": "full", "stage": stage,
         "sha256": ModelStore(path.parent.parent).digest(MODEL, version),
         "published_at": time.time()}
    )


def publish(kafka: KafkaConnection, update: ModelUpdate) -> None:
    producer = EventProducer(kafka)
    producer.send(kafka.topic(MODEL_UPDATES), update.log_key, update)
    producer.close()


def events(user: str, items: Sequence[str], start: float | None = None) -> list[InteractionEvent]:
    start = start or time.time() - len(items)
    return [
        InteractionEvent(
            event_id=uuid.uuid4().hex, user_id=user, session_id=f"{user}-s", item_id=item,
            event_type=EventType.VIEW, timestamp=start + n,
            context=EventContext(category=category(item)),
        )
        for n, item in enumerate(items)
    ]


class FeatureFeed:
    """Events go through Kafka and the feature writer's Lua script into Redis, with their real
    partitions and offsets (a stand-in for the feature worker process)."""

    def __init__(self, kafka: KafkaConnection, redis_connection: RedisConnection) -> None:
        self.kafka = kafka
        self.redis = redis_connection
        self.topic = kafka.topic(INTERACTIONS)
        self.produced = 0

    def ingest(self, batch: Sequence[InteractionEvent]) -> None:
        producer = EventProducer(self.kafka)
        for event in batch:
            producer.send(self.topic, event.user_id, event)
        producer.close()
        self.produced += len(batch)
        messages = read_all(self.kafka, self.topic, self.produced)
        positioned = [
            PositionedEvent(m.partition() or 0, m.offset() or 0,
                            decode(InteractionEvent, m.value()), m.timestamp()[1])
            for m in messages
        ]
        asyncio.run(self._apply(positioned))

    async def _apply(self, positioned: list[PositionedEvent]) -> None:
        writer = FeatureWriter(FeatureWriter.connect(self.redis), self.redis.key_prefix)
        try:
            await writer.apply(positioned)  # positions applied before are skipped
        finally:
            await writer.close()


def settings(
    kafka: KafkaConnection,
    scorer_redis: RedisConnection,
    store: Path,
    instance: str = "a",
    canary: CanaryPolicy | None = None,
) -> ServeSettings:
    return ServeSettings(
        kafka=kafka.as_principal(SCORER),
        redis=scorer_redis,
        model_store=store,
        model_name=MODEL,
        group_id=f"{kafka.topic_prefix}scorer",  # one group per test: no stale members
        instance_id=instance,
        requests_offset_reset="earliest",
        canary=canary or CanaryPolicy(),
        config_refresh_s=0.05,
    )


@contextmanager
def running(service: ScorerService) -> Iterator[ScorerService]:
    service.start()
    try:
        yield service
    finally:
        service.stop()


def wait_for(predicate: Callable[[], bool], timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def serving_version(service: ScorerService) -> str | None:
    serving = service.registry.snapshot().serving
    return serving.version if serving else None


def request(user: str, k: int = 10, **fields: object) -> RecommendationRequest:
    return RecommendationRequest.model_validate(
        {"request_id": uuid.uuid4().hex, "user_id": user, "session_id": f"{user}-s", "k": k,
         "sent_at": time.time(), **fields}
    )


def send_requests(kafka: KafkaConnection, requests: Sequence[RecommendationRequest]) -> None:
    producer = EventProducer(kafka)
    for r in requests:
        producer.send(kafka.topic(REC_REQUESTS), r.user_id, r)
    producer.close()


def responses(kafka: KafkaConnection, expected: int, timeout_s: float = 60.0) -> list[
    RecommendationResponse
]:
    messages: list[Message] = read_all(kafka, kafka.topic(REC_RESPONSES), expected, timeout_s)
    return [decode(RecommendationResponse, m.value()) for m in messages]


def ask(kafka: KafkaConnection, r: RecommendationRequest) -> RecommendationResponse:
    """Sends one request and returns its response (responses of earlier requests are skipped)."""
    before = len(responses(kafka, 0, timeout_s=1.0))
    send_requests(kafka, [r])
    answered = [x for x in responses(kafka, before + 1) if x.request_id == r.request_id]
    assert len(answered) == 1, f"expected one response for {r.request_id}, got {len(answered)}"
    return answered[0]


class Background:
    """Runs a callable in a thread until stopped (load generators in tests)."""

    def __init__(self, target: Callable[[threading.Event], None]) -> None:
        self.stop = threading.Event()
        self._thread = threading.Thread(target=target, args=(self.stop,), daemon=True)

    def __enter__(self) -> Background:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._thread.join(timeout=60)
