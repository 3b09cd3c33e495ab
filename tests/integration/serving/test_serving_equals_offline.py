"""Serving equals offline: on the real Kafka, Redis, feature worker and scorer, every served list
is the list the offline reference (models/reference_answer.py) computes for the same version
from the same events: the same items in the same order, scores within float tolerance.

The users' events carry what used to set the two apart: a view and a click of the same item,
an item the version does not know, an event that arrives after a later one. Two arms answer:
`model` (the live version) and `frozen` (an older version pinned beside it).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import redis

from models.reference_answer import reference_answer
from models.session_checkpoint import SessionCheckpoint, load_session_model
from models.store import ModelStore
from schemas.events import EventContext, EventType, InteractionEvent
from schemas.recommendations import RecommendationResponse
from serving.experiment import Experiment, ExperimentArm
from serving.service import ScorerService
from streams.kafka.connection import KafkaConnection
from streams.redis.connection import RedisConnection
from tests.integration.serving.helpers import (
    MODEL,
    category,
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
from tests.integration.streams.feature_worker.stream_harness import (
    produce,
    start_worker,
    topic_events,
    wait_until_applied,
    worker_env,
)

pytestmark = pytest.mark.e2e

USERS = 16
K = 10
ARMS = Experiment(name="equal", arms=(
    ExperimentArm(name="live", policy="model"),
    ExperimentArm(name="pinned", policy="frozen", version="1.0"),
))


def event(user: str, item: str, at: float, kind: EventType = EventType.VIEW) -> InteractionEvent:
    return InteractionEvent(
        event_id=uuid.uuid4().hex, user_id=user, session_id=f"{user}-s", item_id=item,
        event_type=kind, timestamp=at, context=EventContext(category=category(item)),
    )


def history(n: int, start: float) -> list[InteractionEvent]:
    """Views with a click of the item just viewed, an item no version knows (i9999), and one
    event that arrives after a later one."""
    user = f"user{n}"
    items = [f"i{(n * 37 + 11 * j) % 300}" for j in range(12 + n)]
    out = []
    for j, item in enumerate(items):
        at = start + 60 * j
        out.append(event(user, item, at))
        if j % 4 == 1:
            out.append(event(user, item, at + 1, EventType.CLICK))
    out.append(event(user, "i9999", start + 60 * len(items)))
    out.append(event(user, f"i{(n * 53) % 300}", start + 30))  # late: belongs near the start
    return out


def test_every_served_list_is_the_offline_reference_of_its_version(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    scorer_redis_connection: RedisConnection,
    redis_admin: redis.Redis,
    tmp_path: Path,
) -> None:
    start = time.time() - 86_400
    events = {f"user{n}": history(n, start) for n in range(USERS)}
    produced = produce(kafka, [e for user_events in events.values() for e in user_events])
    worker = start_worker(worker_env(kafka, redis_connection), tmp_path / "logs")
    try:
        wait_until_applied(redis_admin, redis_connection, topic_events(kafka, produced), 120)
    finally:
        worker.stop()
    store = tmp_path / "models"
    publish(kafka, model_update(save_model(store, "1.0", seed=1), "1.0"))
    publish(kafka, model_update(save_model(store, "1.1", seed=2), "1.1"))
    scorer = settings(kafka, scorer_redis_connection, store).model_copy(update={"experiment": ARMS})
    service = ScorerService(scorer)
    with running(service):
        assert wait_for(lambda: serving_version(service) == "1.1")
        assert service.pinned.wait_until_loaded(60)
        asked = [request(user, k=K) for user in events]
        send_requests(kafka, asked)
        answered = {r.user_id: r for r in responses(kafka, len(asked))}
    assert set(answered) == set(events)
    versions = {v: load_session_model(ModelStore(store), MODEL, v) for v in ("1.0", "1.1")}
    arms = {r.arm for r in answered.values()}
    assert arms == {"live", "pinned"}, "both arms answer some of the users"
    for user, response in answered.items():
        check(response, versions, events[user], scorer.history_length)


def check(
    response: RecommendationResponse,
    versions: dict[str, SessionCheckpoint],
    events: list[InteractionEvent],
    history_length: int,
) -> None:
    """The response is its version's reference answer for the user's events until then."""
    assert response.status == "ok" and response.strategy == "model"
    assert response.experiment == "equal"
    assert response.model_version == {"live": "1.1", "pinned": "1.0"}[response.arm or ""]
    seen = [(e.item_id, e.timestamp) for e in events if e.timestamp <= response.served_at]
    expected = reference_answer(versions[response.model_version], seen, K, history_length,
                                excluded={i for i, _ in seen})
    assert [i.item_id for i in response.items] == [i for i, _ in expected], response.user_id
    np.testing.assert_allclose(
        [i.score for i in response.items], [s for _, s in expected], rtol=1e-4, atol=1e-4
    )
