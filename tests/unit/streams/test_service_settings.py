import pytest
from pydantic import ValidationError

from deploy.demo.settings import DemoSettings
from deploy.local.settings import LocalStackSettings
from online_trainer.archive_settings import ArchiveSettings
from online_trainer.settings import TrainSettings
from serving.settings import ServeSettings
from streams.feature_worker.settings import StreamSettings
from streams.kafka.connection import KafkaConnection
from streams.monitor.settings import MonitorSettings
from streams.redis.connection import RedisConnection
from streams.service_settings import PROCESS_VARIABLES, SERVICE_VARIABLES, ServiceSettings


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


SERVICES: list[type[ServiceSettings]] = [
    StreamSettings, TrainSettings, ServeSettings, MonitorSettings, ArchiveSettings
]


def test_the_services_namespace_is_exactly_their_settings_and_the_process_variables() -> None:
    fields = {name for settings in SERVICES for name in settings.model_fields}
    assert fields | set(PROCESS_VARIABLES) == SERVICE_VARIABLES, (
        "add new settings to streams.service_settings.SERVICE_VARIABLES: "
        f"{sorted(fields - SERVICE_VARIABLES)}; remove gone ones: "
        f"{sorted(SERVICE_VARIABLES - fields - set(PROCESS_VARIABLES))}"
    )


@pytest.mark.parametrize("settings", SERVICES)
@pytest.mark.parametrize(
    "variable", ["STREAMREC_MODEL_STOR", "STREAMREC_MODLE__DIM", "streamrec_batch_max_event"]
)
def test_a_name_no_service_knows_is_an_error_for_every_service_without_its_value(
    monkeypatch: pytest.MonkeyPatch, settings: type[ServiceSettings], variable: str
) -> None:
    monkeypatch.setenv(variable, "secret-value")
    with pytest.raises(ValidationError) as info:
        settings()
    assert variable in str(info.value) and "secret-value" not in str(info.value)


@pytest.mark.parametrize("settings", SERVICES)
def test_one_environment_configures_every_service(
    monkeypatch: pytest.MonkeyPatch, settings: type[ServiceSettings]
) -> None:
    for variable, value in {
        "STREAMREC_MODEL_STORE": "/models",  # the scorer's
        "STREAMREC_STORE_DIR": "/models",  # the trainer's
        "STREAMREC_MODEL__DIM": "32",  # the trainer's, nested
        "STREAMREC_DURABLE_AFTER_S": "3",  # the feature worker's
        "STREAMREC_WINDOW_S": "60",  # the monitor's
        "STREAMREC_LOG_LEVEL": "DEBUG",  # the process's
        "STREAMREC_LOCAL__KAFKA_PORT": "9092",  # the local stack's
        "STREAMREC_DEMO__EVENTS_PER_S": "50",  # the demo's
    }.items():
        monkeypatch.setenv(variable, value)
    settings()


def test_a_misspelt_nested_field_is_an_error_for_the_service_that_has_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STREAMREC_MODEL__DIMS", "32")
    with pytest.raises(ValidationError):
        TrainSettings()
    ServeSettings()  # not its setting: the trainer reports it


def test_the_local_stack_and_the_demo_refuse_unknown_names_of_their_own_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STREAMREC_LOCAL__KAFKA_PROT", "9092")
    monkeypatch.setenv("STREAMREC_DEMO__EVENTS_PER_SECOND", "50")
    monkeypatch.setenv("STREAMREC_MODEL_STORE", "/models")  # a service's: not theirs to judge
    with pytest.raises(ValidationError, match="STREAMREC_LOCAL__KAFKA_PROT"):
        LocalStackSettings()
    with pytest.raises(ValidationError, match="STREAMREC_DEMO__EVENTS_PER_SECOND"):
        DemoSettings()
    monkeypatch.delenv("STREAMREC_LOCAL__KAFKA_PROT")
    monkeypatch.delenv("STREAMREC_DEMO__EVENTS_PER_SECOND")
    LocalStackSettings()
    DemoSettings()
