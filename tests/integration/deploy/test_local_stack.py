from __future__ import annotations

import stat
import time

import pytest
import redis
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient
from pydantic import SecretStr

from deploy.local.settings import LocalStackSettings
from deploy.local.stack import LocalStack
from streams.kafka.connection import KafkaConnection
from streams.kafka.principals import OPERATOR, PRINCIPALS
from streams.redis.connection import RedisConnection


def test_second_up_is_harmless_and_starts_nothing(stack: LocalStack) -> None:
    before = {s.name: s.owned_pid for s in stack.status()}
    report = LocalStack(LocalStackSettings()).up()
    assert report.started == ()
    assert {s.name: s.owned_pid for s in report.states} == before
    assert all(s.running for s in report.states)


def test_scorer_user_can_read_but_cannot_write(
    scorer_redis_connection: RedisConnection, redis_connection: RedisConnection
) -> None:
    key = f"{redis_connection.key_prefix}i:{{probe}}"  # a key the feature worker may write
    redis_connection.client().set(key, "1")
    scorer = scorer_redis_connection.client()
    assert scorer.get(key) == b"1"
    with pytest.raises(redis.exceptions.NoPermissionError):
        scorer.set(key, "2")
    with pytest.raises(redis.exceptions.NoPermissionError):
        scorer.eval("return redis.call('SET', KEYS[1], '3')", 1, key)
    assert scorer.get(key) == b"1"


def test_default_user_is_disabled(stack: LocalStack) -> None:
    anonymous = redis.Redis(port=stack.settings.redis_port, socket_timeout=2)
    with pytest.raises(redis.exceptions.AuthenticationError):
        anonymous.ping()


def test_services_cannot_touch_keys_outside_the_namespace(
    redis_connection: RedisConnection,
) -> None:
    with pytest.raises(redis.exceptions.NoPermissionError):
        redis_connection.client().set("elsewhere", "1")


def test_redis_runs_with_the_configured_memory_bound_and_no_eviction(
    stack: LocalStack, redis_admin: redis.Redis
) -> None:
    config = redis_admin.config_get("maxmemory*")
    assert int(str(config["maxmemory"])) == stack.settings.redis_maxmemory_mb * 1024 * 1024
    assert config["maxmemory-policy"] == "noeviction"


def test_every_kafka_principal_has_a_password_only_its_owner_can_read(stack: LocalStack) -> None:
    secrets = stack.settings.secrets_dir
    for principal in PRINCIPALS:
        path = secrets / f"kafka-{principal}"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert len(path.read_text().strip()) >= 24
    config = stack.kafka.dir / "server.properties"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600  # holds the broker's password


@pytest.mark.alone  # the session broker's operator password changes under every client
def test_up_rotates_a_deleted_kafka_password(stack: LocalStack, kafka: KafkaConnection) -> None:
    path = stack.settings.secrets_dir / f"kafka-{OPERATOR}"
    old = kafka.model_copy(
        update={"sasl_username": OPERATOR, "sasl_password": SecretStr(path.read_text().strip())}
    )
    path.unlink()

    LocalStack(LocalStackSettings()).up()

    assert path.read_text().strip() != old.credentials()[1]
    AdminClient(kafka.as_principal(OPERATOR).client_config()).list_topics(timeout=10)
    errors: list[KafkaError] = []
    producer = Producer({**old.client_config(), "error_cb": errors.append})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
