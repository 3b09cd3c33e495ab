"""The experiment's arms change at run time through Redis, as the rest of the serving
configuration does, on the real Kafka, Redis and scorer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from schemas.recommendations import RecommendationResponse
from serving.experiment import Experiment, ExperimentArm
from serving.features import ServingKeys
from serving.service import ScorerService
from streams.kafka.connection import KafkaConnection
from streams.redis.connection import RedisConnection
from tests.integration.serving.helpers import (
    FeatureFeed,
    ask,
    events,
    model_update,
    publish,
    request,
    running,
    save_model,
    serving_version,
    settings,
    wait_for,
)

pytestmark = pytest.mark.e2e

PINNED = Experiment(name="runtime", arms=(
    ExperimentArm(name="old", policy="frozen", version="1.0"),
))


def test_a_stored_experiment_replaces_the_configured_one_within_a_refresh(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    scorer_redis_connection: RedisConnection,
    redis_admin: redis.Redis,
    tmp_path: Path,
) -> None:
    FeatureFeed(kafka, redis_connection).ingest(events("u1", ["i1", "i2", "i3"]))
    publish(kafka, model_update(save_model(tmp_path, "1.0", seed=1), "1.0"))
    publish(kafka, model_update(save_model(tmp_path, "1.1", seed=2), "1.1"))
    service = ScorerService(settings(kafka, scorer_redis_connection, tmp_path))
    key = ServingKeys(redis_connection.key_prefix).experiment
    with running(service):
        assert wait_for(lambda: serving_version(service) == "1.1")
        configured = ask(kafka, request("u1"))
        assert (configured.experiment, configured.arm) == ("serving", "ranker")
        assert configured.model_version == "1.1"

        redis_admin.set(key, PINNED.model_dump_json())
        pinned = answer_until(kafka, lambda r: r.arm == "old" and r.model_version == "1.0")
        assert pinned.experiment == "runtime" and pinned.strategy == "model"

        redis_admin.set(key, b'{"arms": []}')  # invalid: the configured experiment applies
        assert answer_until(kafka, lambda r: r.arm == "ranker").experiment == "serving"
        samples = service.metrics.registry
        assert samples.get_sample_value("streamrec_serve_answers_total", {
            "experiment": "runtime", "arm": "old", "strategy": "model", "status": "ok",
        }) is not None
        assert samples.get_sample_value("streamrec_serve_experiment_arm_weight", {
            "experiment": "serving", "arm": "ranker", "policy": "ranker",
        }) == 1.0


def answer_until(
    kafka: KafkaConnection, done: Callable[[RecommendationResponse], bool], attempts: int = 40
) -> RecommendationResponse:
    """Asks for u1 until an answer satisfies `done` (the scorer re-reads every 50 ms here, and a
    pinned version loads in the background)."""
    response = None
    for _ in range(attempts):
        response = ask(kafka, request("u1"))
        if done(response):
            return response
    raise AssertionError(f"no answer as wanted; the last: {response}")
