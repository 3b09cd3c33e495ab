"""The broker enforces the principals' grants: no credential, no connection; a credential does
only what its principal is granted (streams/kafka/principals.py)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from pydantic import SecretStr

from deploy.local.stack import LocalStack
from schemas.topics import ALERTS_DRIFT, CATALOG, INTERACTIONS, KPI_METRICS, MODEL_UPDATES
from streams.kafka.connection import KafkaConnection
from streams.kafka.principals import (
    APP,
    FEATURE_WORKER,
    MONITOR,
    OPERATOR,
    SCORER,
    TRAINER,
)
from tests.integration.kafka_helpers import read_all


def write(
    connection: KafkaConnection, topic: str, idempotent: bool = False
) -> KafkaError | None:
    """Produces one record as the connection's principal; the broker's verdict (None: stored).

    Not idempotent unless asked: a principal that may write no topic at all cannot even get an
    idempotent producer id (a fatal cluster authorization error), which would hide the topic's
    own verdict."""
    outcome: list[KafkaError | None] = []
    producer = Producer(
        {**connection.client_config(), "enable.idempotence": idempotent, "acks": "all",
         "message.timeout.ms": 10_000}
    )
    producer.produce(
        topic, key=b"k", value=b"{}", on_delivery=lambda err, _msg: outcome.append(err)
    )
    producer.flush(15)
    assert outcome, f"no delivery report for {topic}"
    return outcome[0]


def test_a_client_without_credentials_cannot_connect(kafka: KafkaConnection) -> None:
    anonymous = kafka.model_copy(update={"security_protocol": "PLAINTEXT"})
    admin = AdminClient({**anonymous.client_config(), "socket.timeout.ms": 2000})

    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)


def test_a_wrong_password_is_an_authentication_error(kafka: KafkaConnection) -> None:
    impostor = kafka.model_copy(
        update={"sasl_username": APP, "sasl_password": SecretStr("not-it")}
    )
    errors: list[KafkaError] = []
    producer = Producer({**impostor.client_config(), "error_cb": errors.append})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)

    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors


def test_app_writes_interactions_but_not_model_updates(kafka: KafkaConnection) -> None:
    app = kafka.as_principal(APP)

    # The idempotent producer every service uses needs nothing beyond WRITE on its topics.
    assert write(app, app.topic(INTERACTIONS), idempotent=True) is None
    refused = write(app, app.topic(MODEL_UPDATES))
    assert refused is not None
    assert refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_operator_reads_every_topic_and_writes_none(kafka: KafkaConnection) -> None:
    operator = kafka.as_principal(OPERATOR)
    for spec in CATALOG:
        topic = kafka.topic(spec)
        assert write(kafka, topic) is None  # admin

        assert len(read_all(operator, topic, expected=1)) == 1, topic
        refused = write(operator, topic)
        assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


@pytest.mark.parametrize(
    ("topic", "writers"),
    [
        # Model versions come from the trainer and the scorer's canary decisions only; KPIs and
        # drift alerts from the monitor only.
        (MODEL_UPDATES.name, {TRAINER, SCORER}),
        (KPI_METRICS.name, {MONITOR}),
        (ALERTS_DRIFT.name, {MONITOR}),
    ],
)
def test_only_the_principals_that_own_a_control_topic_can_write_it(
    kafka: KafkaConnection, topic: str, writers: set[str]
) -> None:
    for principal in (APP, OPERATOR, FEATURE_WORKER, TRAINER, SCORER, MONITOR):
        verdict = write(kafka.as_principal(principal), kafka.topic(topic))

        if principal in writers:
            assert verdict is None, (principal, verdict)
        else:
            assert verdict is not None, principal
            assert verdict.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, (principal, verdict)


def test_a_principal_reads_nothing_it_is_not_granted(kafka: KafkaConnection) -> None:
    """The trainer (reads interactions and alerts) sees no request a user sent."""
    topic = kafka.topic("rec.requests")
    assert write(kafka, topic) is None

    assert read_all(kafka.as_principal(TRAINER), topic, expected=1, timeout_s=5) == []


def test_sasl_ssl_with_the_local_ca_authenticates_over_tls(
    stack: LocalStack, kafka: KafkaConnection
) -> None:
    s = stack.settings
    tls = kafka.model_copy(
        update={
            "bootstrap_servers": f"{s.host}:{s.tls_port}",
            "security_protocol": "SASL_SSL",
            "ssl_ca_location": str(stack.kafka.certificates.ca_certificate.resolve()),
        }
    ).as_principal(APP)

    assert write(tls, tls.topic(INTERACTIONS), idempotent=True) is None
    refused = write(tls, tls.topic(MODEL_UPDATES))
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_tls_client_that_does_not_trust_the_local_ca_is_refused(
    stack: LocalStack, kafka: KafkaConnection
) -> None:
    s = stack.settings
    untrusting = kafka.model_copy(
        update={"bootstrap_servers": f"{s.host}:{s.tls_port}", "security_protocol": "SASL_SSL"}
    ).as_principal(APP)
    errors: list[KafkaError] = []
    producer = Producer({**untrusting.client_config(), "error_cb": errors.append})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)

    # librdkafka has reported the failed certificate check under either code in this
    # test's runs; the reason it gives is the same.
    assert errors and errors[0].code() in (KafkaError._SSL, KafkaError._TRANSPORT), errors
    assert "certificate verify failed" in errors[0].str(), errors
