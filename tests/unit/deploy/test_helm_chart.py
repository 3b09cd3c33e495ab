from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from deploy.chart_catalog import ALERTS_FILE, CATALOG_FILE, CHART_DIR, SCALED, render
from online_trainer.archive_settings import ArchiveSettings
from online_trainer.settings import TrainSettings
from schemas.topics import CATALOG
from serving.settings import ServeSettings
from streams.feature_worker.settings import StreamSettings
from streams.kafka.acls import bindings
from streams.kafka.connection import KafkaConnection
from streams.monitor.settings import MonitorSettings
from streams.service_settings import ServiceSettings

ROOT = Path(__file__).resolve().parents[3]
BIN = ROOT / ".venv" / "bin"
HELM = BIN / "helm"
MANIFESTCHECK = BIN / "manifestcheck"
CRDS = ROOT / ".venv" / "kube" / "crds"
SETTINGS: dict[str, type[ServiceSettings]] = {
    "feature-worker": StreamSettings, "trainer": TrainSettings, "scorer": ServeSettings,
    "monitor": MonitorSettings, "archive": ArchiveSettings,
}
PREFIX = "tenant-a."
# A helm built from its module has no Kubernetes version of its own to check kubeVersion against.
KUBE_VERSION = "v1.33.0"
NAMESPACE = "streamrec"


def _tool(path: Path) -> str:
    assert path.exists(), f"{path} is missing: `make install` builds it"
    return str(path)


def _render(*values: str) -> str:
    command = [_tool(HELM), "template", "streamrec", str(CHART_DIR), "--namespace", NAMESPACE,
               "--kube-version", KUBE_VERSION]
    for value in values:
        command += ["--set", value]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def rendered() -> str:
    return _render()


@pytest.fixture(scope="module")
def documents(rendered: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(rendered) if d]


def _of(documents: list[dict[str, Any]], kind: str) -> Iterator[dict[str, Any]]:
    return (d for d in documents if d["kind"] == kind)


def _check(manifests: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_tool(MANIFESTCHECK), "-crds", str(CRDS), "-namespace", NAMESPACE], input=manifests,
        capture_output=True, text=True, check=False,
    )


def test_helm_lint_is_clean() -> None:
    result = subprocess.run(
        [_tool(HELM), "lint", "--strict", "--kube-version", KUBE_VERSION, str(CHART_DIR)],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_rendered_manifest_is_valid_for_kubernetes_and_its_custom_resource_schema(
    rendered: str, documents: list[dict[str, Any]]
) -> None:
    kinds = {(d["apiVersion"], d["kind"]) for d in documents}
    assert {("kafka.strimzi.io/v1", "KafkaTopic"), ("kafka.strimzi.io/v1", "KafkaUser"),
            ("keda.sh/v1alpha1", "ScaledObject"), ("monitoring.coreos.com/v1", "ServiceMonitor"),
            ("monitoring.coreos.com/v1", "PrometheusRule"), ("apps/v1", "Deployment"),
            ("batch/v1", "CronJob")} <= kinds
    result = _check(rendered)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(documents)} document(s) valid" in result.stdout
    prefixed = _check(_render(f"kafka.topicPrefix={PREFIX}", "scorer.autoscaling.enabled=false"))
    assert prefixed.returncode == 0, prefixed.stdout


def test_the_validator_refuses_an_unknown_field_a_bad_enum_and_a_broken_rule(
    documents: list[dict[str, Any]],
) -> None:
    documents = copy.deepcopy(documents)
    user = next(_of(documents, "KafkaUser"))
    user["spec"]["authorization"]["acls"][0]["operations"] = ["Reed"]
    deployment = next(_of(documents, "Deployment"))
    deployment["spec"]["replica"] = 2
    scaled = next(_of(documents, "ScaledObject"))
    scaled["spec"]["minReplicaCount"] = scaled["spec"]["maxReplicaCount"] + 1
    result = _check(yaml.safe_dump_all([user, deployment, scaled]))
    assert result.returncode == 1
    assert 'Unsupported value: "Reed"' in result.stdout
    assert 'unknown field "spec.replica"' in result.stdout
    assert "minReplicaCount must be less than or equal to maxReplicaCount" in result.stdout


def test_the_committed_catalog_is_what_the_generator_writes_now() -> None:
    assert CATALOG_FILE.read_text() == render(), "run `streamrec helm catalog`"


def _topics(documents: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["spec"]["topicName"]: t["spec"] for t in _of(documents, "KafkaTopic")}


def _acls(documents: list[dict[str, Any]]) -> set[tuple[str, ...]]:
    return {
        (acl["resource"]["type"].upper(), acl["resource"]["name"],
         acl["resource"]["patternType"].upper(), f"User:{user['metadata']['name']}",
         acl["host"], operation.upper())
        for user in _of(documents, "KafkaUser")
        for acl in user["spec"]["authorization"]["acls"]
        for operation in acl["operations"]
    }


def _local_acls(prefix: str) -> set[tuple[str, ...]]:
    return {
        (_name(b.restype), b.name, _name(b.resource_pattern_type), b.principal, b.host,
         _name(b.operation))
        for b in bindings(KafkaConnection(topic_prefix=prefix))
    }


def _name(value: object) -> str:
    name = getattr(value, "name", None)
    assert isinstance(name, str), value
    return name


@pytest.mark.parametrize("prefix", ["", PREFIX])
def test_rendered_topics_principals_and_acls_equal_what_topics_create_makes(
    prefix: str, documents: list[dict[str, Any]]
) -> None:
    docs = documents if not prefix else [
        d for d in yaml.safe_load_all(_render(f"kafka.topicPrefix={prefix}")) if d
    ]
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())["kafka"]
    topics = _topics(docs)
    assert set(topics) == {f"{prefix}{spec.name}" for spec in CATALOG}
    for spec in CATALOG:
        rendered = topics[f"{prefix}{spec.name}"]
        assert rendered["partitions"] == spec.partitions
        assert rendered["replicas"] == values["replicas"]
        assert rendered["config"] == {
            **spec.config(), "min.insync.replicas": str(values["minInsyncReplicas"])
        }
    assert all(u["spec"]["authentication"]["type"] == "scram-sha-512"
               for u in _of(docs, "KafkaUser"))
    assert _acls(docs) == _local_acls(prefix)


def test_keda_scales_workers_scorers_and_monitors_on_their_groups_lag_up_to_the_partitions(
    documents: list[dict[str, Any]],
) -> None:
    deployments = {d["metadata"]["name"]: d for d in _of(documents, "Deployment")}
    scaled = {s["metadata"]["name"]: s["spec"] for s in _of(documents, "ScaledObject")}
    assert set(scaled) == {f"streamrec-{name}" for name in SCALED}
    partitions = {spec.name: spec.partitions for spec in CATALOG}
    for name, (_principal, settings, topics) in SCALED.items():
        spec = scaled[f"streamrec-{name}"]
        assert spec["scaleTargetRef"]["name"] in deployments
        assert "replicas" not in deployments[spec["scaleTargetRef"]["name"]]["spec"]
        assert spec["maxReplicaCount"] == max(partitions[t.name] for t in topics)
        triggers = spec["triggers"]
        assert {t["metadata"]["topic"] for t in triggers} == {t.name for t in topics}
        for trigger in triggers:
            assert trigger["type"] == "kafka"
            assert trigger["metadata"]["consumerGroup"] == settings.model_fields["group_id"].default
            assert trigger["metadata"]["allowIdleConsumers"] == "false"
            assert trigger["metadata"]["sasl"] == "scram_sha512"


def _settings_env(documents: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    configmaps = {c["metadata"]["name"]: c["data"] for c in _of(documents, "ConfigMap")}
    out: dict[str, dict[str, str]] = {}
    for workload in [*_of(documents, "Deployment"), *_of(documents, "CronJob")]:
        pod = workload["spec"]["template"]["spec"] if workload["kind"] == "Deployment" else (
            workload["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        )
        (container,) = pod["containers"]
        env = dict(configmaps[container["envFrom"][0]["configMapRef"]["name"]])
        for variable in container["env"]:
            assert "secretKeyRef" in variable["valueFrom"], variable["name"]
            env[variable["name"]] = "from-a-secret"
        out[container["name"]] = env
    return out


def _known(model: type[BaseModel], parts: list[str]) -> bool:
    field = model.model_fields.get(parts[0].lower())
    if field is None:
        return False
    if len(parts) == 1:
        return True
    nested = field.annotation
    return isinstance(nested, type) and issubclass(nested, BaseModel) and _known(nested, parts[1:])


def test_each_service_gets_only_settings_its_class_defines_and_logs_in_as_its_own_principal(
    documents: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    envs = _settings_env(documents)
    assert set(envs) == set(SETTINGS)
    for name, env in envs.items():
        settings_class = SETTINGS[name]
        for key in env:
            assert key.startswith("STREAMREC_"), key
            assert _known(settings_class, key[len("STREAMREC_"):].split("__")), (name, key)
        with monkeypatch.context() as patched:
            for key, value in env.items():
                patched.setenv(key, value)
            settings = settings_class()
        assert settings.kafka.sasl_username == settings_class.KAFKA_PRINCIPAL
        assert settings.kafka.uses_sasl and settings.kafka.uses_tls
        assert settings.kafka.sasl_password is not None
        if name in ("feature-worker", "scorer"):
            assert settings.redis.cluster  # Redis Cluster endpoints
            assert settings.redis.password is not None
        if name != "archive":
            assert settings.metrics_port > 0 and settings.metrics_host == "0.0.0.0"


def test_passwords_come_from_the_principals_own_secret(documents: list[dict[str, Any]]) -> None:
    users = {u["metadata"]["name"] for u in _of(documents, "KafkaUser")}
    for workload in [*_of(documents, "Deployment"), *_of(documents, "CronJob")]:
        text = json.dumps(workload)
        (container,) = (workload["spec"]["template"]["spec"] if workload["kind"] == "Deployment"
                        else workload["spec"]["jobTemplate"]["spec"]["template"]["spec"]
                        )["containers"]
        password = next(e for e in container["env"]
                        if e["name"] == "STREAMREC_KAFKA__SASL_PASSWORD")
        principal = SETTINGS[container["name"]].KAFKA_PRINCIPAL
        assert password["valueFrom"]["secretKeyRef"] == {"name": principal, "key": "password"}
        assert principal in users, text[:80]


def test_probes_watch_the_metrics_endpoint_that_the_service_monitor_scrapes(
    documents: list[dict[str, Any]],
) -> None:
    jobs = {job["job_name"] for job in yaml.safe_load(
        (ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())["scrape_configs"]}
    services = list(_of(documents, "Service"))
    assert {s["metadata"]["labels"]["streamrec.io/job"] for s in services} == jobs
    (monitor,) = _of(documents, "ServiceMonitor")
    assert monitor["spec"]["jobLabel"] == "streamrec.io/job"
    assert all(monitor["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()
               for s in services)
    for deployment in _of(documents, "Deployment"):
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}


def test_the_prometheus_rule_carries_the_alert_rules_of_the_local_prometheus(
    documents: list[dict[str, Any]],
) -> None:
    (rule,) = _of(documents, "PrometheusRule")
    assert rule["spec"]["groups"] == yaml.safe_load(ALERTS_FILE.read_text())["groups"]
