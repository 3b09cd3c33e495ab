from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from online_trainer.archive_settings import ArchiveSettings
from online_trainer.settings import TrainSettings
from serving.settings import ServeSettings
from streams.feature_worker.settings import StreamSettings
from streams.kafka.principals import ADMIN, PRINCIPALS, SUPER_USERS
from streams.monitor.settings import MonitorSettings
from streams.service_settings import ServiceSettings

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "deploy" / "compose.yaml"
# `streamrec <command>` -> the settings class that names the principal it logs in as.
COMMANDS: dict[str, type[ServiceSettings]] = {
    "stream": StreamSettings, "train": TrainSettings, "serve": ServeSettings,
    "monitor": MonitorSettings, "archive": ArchiveSettings,
}


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def _broker_properties() -> dict[str, str]:
    content = _compose()["configs"]["kafka-server"]["content"]
    pairs = (line.split("=", 1) for line in content.splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def test_every_kafka_listener_requires_sasl_and_unlisted_access_is_denied() -> None:
    broker = _broker_properties()
    listeners = [entry.split("://")[0] for entry in broker["listeners"].split(",")]
    mapping = broker["listener.security.protocol.map"].split(",")
    protocols = dict(entry.split(":") for entry in mapping)
    assert set(listeners) == set(protocols)
    assert all(protocols[name].startswith("SASL_") for name in listeners), protocols
    assert broker["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert broker["listener.name.controller.sasl.enabled.mechanisms"] == "PLAIN"
    assert broker["allow.everyone.if.no.acl.found"] == "false"
    assert broker["authorizer.class.name"].endswith("StandardAuthorizer")
    assert broker["super.users"] == ";".join(f"User:{name}" for name in SUPER_USERS)
    # The broker stores every principal's credential, and nothing else.
    kafka = _compose()["services"]["kafka"]
    assert set(kafka["secrets"]) == {f"kafka-{name}" for name in PRINCIPALS}


def test_every_service_logs_in_as_its_own_principal_holding_only_its_own_password() -> None:
    services = _compose()["services"]
    clients = {name: s for name, s in services.items()
               if "STREAMREC_KAFKA__BOOTSTRAP_SERVERS" in s.get("environment", {})}
    assert set(clients) >= {"topics", "feature-worker", "trainer", "scorer", "monitor", "archive"}
    for name, service in clients.items():
        env = service["environment"]
        command = service["command"][0]
        expected = ADMIN if command == "topics" else COMMANDS[command].KAFKA_PRINCIPAL
        assert env["STREAMREC_KAFKA__SECURITY_PROTOCOL"].startswith("SASL_"), name
        assert env["STREAMREC_KAFKA__SASL_USERNAME"] == expected, name
        kafka_secrets = [s for s in service["secrets"] if s.startswith("kafka-")]
        assert kafka_secrets == [f"kafka-{expected}"], name


def test_the_secret_files_and_the_setup_comment_name_every_principal() -> None:
    compose = _compose()
    assert {n for n in compose["secrets"] if n.startswith("kafka-")} == {
        f"kafka-{name}" for name in PRINCIPALS
    }
    loop = re.search(r"for p in ([^;]+);", COMPOSE.read_text())
    assert loop is not None
    assert loop.group(1).split() == list(PRINCIPALS)


def test_the_image_installs_the_torchrec_and_fbgemm_the_makefile_pins() -> None:
    makefile = (ROOT / "Makefile").read_text()
    dockerfile = (ROOT / "Dockerfile").read_text()

    def pin(text: str, name: str) -> str:
        found = re.search(rf"^(?:ARG )?{name} ?:?= ?(\S+)$", text, re.MULTILINE)
        assert found is not None, name
        return found.group(1)

    assert pin(dockerfile, "TORCHREC") == pin(makefile, "TORCHREC")
    assert pin(dockerfile, "FBGEMM_VERSION") == pin(makefile, "FBGEMM_VERSION")
