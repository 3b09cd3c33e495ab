from pathlib import Path

import faust
import pytest
from pydantic import SecretStr

from streams.feature_worker.settings import StreamSettings
from streams.feature_worker.worker import broker_credentials
from streams.kafka.connection import KafkaConnection, KafkaCredentialsError


def settings(**kafka: object) -> StreamSettings:
    return StreamSettings(kafka=KafkaConnection.model_validate(kafka))


def test_the_worker_logs_in_as_its_own_principal(tmp_path: Path) -> None:
    (tmp_path / "kafka-feature-worker").write_text("pw\n")

    credentials = broker_credentials(settings(secrets_dir=tmp_path))

    assert isinstance(credentials, faust.SASLCredentials)
    assert (credentials.username, credentials.password) == ("feature-worker", "pw")
    assert credentials.mechanism.value == "SCRAM-SHA-512"
    assert credentials.protocol.value == "SASL_PLAINTEXT"


def test_ssl_alone_makes_the_worker_use_tls_not_plaintext() -> None:
    credentials = broker_credentials(settings(security_protocol="SSL"))

    assert isinstance(credentials, faust.SSLCredentials)


def test_sasl_ssl_is_sasl_over_tls() -> None:
    credentials = broker_credentials(
        settings(security_protocol="SASL_SSL", sasl_password=SecretStr("pw"))
    )

    assert isinstance(credentials, faust.SASLCredentials)
    assert credentials.protocol.value == "SASL_SSL"


def test_a_missing_password_stops_the_worker_before_it_connects(tmp_path: Path) -> None:
    with pytest.raises(KafkaCredentialsError):
        broker_credentials(settings(secrets_dir=tmp_path))


def test_plaintext_is_only_what_is_asked_for() -> None:
    assert broker_credentials(settings(security_protocol="PLAINTEXT")) is None
