import pytest

from online_trainer.archive_settings import ArchiveSettings
from online_trainer.settings import TrainSettings
from serving.settings import ServeSettings
from streams.feature_worker.settings import StreamSettings
from streams.kafka.connection import KafkaConnection
from streams.monitor.settings import MonitorSettings
from streams.redis.connection import RedisConnection
from streams.service_settings import ServiceSettings


@pytest.mark.parametrize(
    ("settings", "principal"),
    [
        (StreamSettings, "feature-worker"),
        (TrainSettings, "trainer"),
        (ServeSettings, "scorer"),
        (MonitorSettings, "monitor"),
        (ArchiveSettings, "archiver"),
    ],
)
def test_each_service_logs_in_as_its_own_kafka_principal(
    monkeypatch: pytest.MonkeyPatch, settings: type[ServiceSettings], principal: str
) -> None:
    # Setting another Kafka field must not reset the principal to the connection's default.
    monkeypatch.setenv("STREAMREC_KAFKA__BOOTSTRAP_SERVERS", "broker:9092")

    assert settings().kafka.sasl_username == principal
    assert settings(kafka=KafkaConnection()).kafka.sasl_username == principal


def test_a_principal_named_in_the_settings_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMREC_KAFKA__SASL_USERNAME", "scorer-eu")

    assert ServeSettings().kafka.sasl_username == "scorer-eu"
    assert ServeSettings(kafka=KafkaConnection(sasl_username="x")).kafka.sasl_username == "x"


def test_the_scorer_reads_redis_as_its_read_only_user_whatever_else_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STREAMREC_REDIS__HOST", "redis.internal")

    assert ServeSettings().redis.username == "scorer"
    assert ServeSettings(redis=RedisConnection(port=7000)).redis.username == "scorer"
    assert ServeSettings(redis=RedisConnection(username="streams")).redis.username == "streams"
    assert StreamSettings().redis.username == "streams"
