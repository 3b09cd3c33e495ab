from pathlib import Path

import pytest
from confluent_kafka import Producer
from pydantic import SecretStr, ValidationError

from streams.kafka.connection import KafkaConnection, KafkaCredentialsError


def test_clients_send_small_requests_without_nagle_delay() -> None:
    config = KafkaConnection(
        bootstrap_servers="127.0.0.1:1", sasl_username="app", sasl_password=SecretStr("pw")
    ).client_config()

    assert config["socket.nagle.disable"] is True
    # librdkafka rejects unknown or ill-typed properties when the client is built.
    Producer(config).flush(0)


def test_connections_authenticate_with_scram_by_default(tmp_path: Path) -> None:
    (tmp_path / "kafka-app").write_text("s3cret\n")

    config = KafkaConnection(sasl_username="app", secrets_dir=tmp_path).client_config()

    assert config["security.protocol"] == "SASL_PLAINTEXT"
    assert config["sasl.mechanism"] == "SCRAM-SHA-512"
    assert (config["sasl.username"], config["sasl.password"]) == ("app", "s3cret")


def test_sasl_without_a_principal_fails_instead_of_connecting_unauthenticated() -> None:
    with pytest.raises(KafkaCredentialsError, match="needs a principal"):
        KafkaConnection().client_config()


def test_sasl_without_a_password_names_the_missing_file(tmp_path: Path) -> None:
    connection = KafkaConnection(sasl_username="trainer", secrets_dir=tmp_path)

    with pytest.raises(KafkaCredentialsError, match="kafka-trainer"):
        connection.client_config()


def test_ssl_alone_is_tls_without_sasl() -> None:
    config = KafkaConnection(security_protocol="SSL", ssl_ca_location="/ca.pem").client_config()

    assert config["security.protocol"] == "SSL"
    assert config["ssl.ca.location"] == "/ca.pem"
    assert not any(key.startswith("sasl.") for key in config)


def test_an_explicit_password_wins_over_the_secrets_folder(tmp_path: Path) -> None:
    (tmp_path / "kafka-app").write_text("from-file\n")
    connection = KafkaConnection(
        sasl_username="app", sasl_password=SecretStr("given"), secrets_dir=tmp_path
    )

    assert connection.client_config()["sasl.password"] == "given"
    assert connection.as_principal("app").client_config()["sasl.password"] == "given"
    assert connection.as_principal("operator").sasl_password is None


def test_min_insync_replicas_cannot_exceed_the_replication_factor() -> None:
    with pytest.raises(ValidationError, match="min_insync_replicas"):
        KafkaConnection(replication_factor=1, min_insync_replicas=2)
    assert KafkaConnection(replication_factor=3, min_insync_replicas=2).min_insync_replicas == 2
