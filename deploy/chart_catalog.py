"""What the Helm chart (deploy/helm/streamrec) creates on Kafka and Prometheus, generated from the
sources `streamrec topics create` and the local Prometheus use, never copied by hand.

`streamrec helm catalog` writes it to the chart's `files/catalog.json`; the chart's templates
turn it into Strimzi `KafkaTopic`s (schemas/topics.py: partitions and topic configs) and
`KafkaUser`s (streams/kafka/principals.py: one SCRAM principal per role with exactly its ACLs,
as streams/kafka/acls.py grants them), KEDA triggers (each scaled service's consumer group and
topics, its replicas bounded by their partitions) and a `PrometheusRule` (the groups of
deploy/prometheus/alerts.yml). A test renders the chart and compares the result with these
sources, and another keeps the committed file equal to this module's output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from schemas.topics import (
    CATALOG,
    INTERACTIONS,
    REC_FEATURES,
    REC_REQUESTS,
    REC_RESPONSES,
    TopicSpec,
)
from serving.settings import ServeSettings
from streams.feature_worker.settings import StreamSettings
from streams.kafka.principals import FEATURE_WORKER, GRANTS, MONITOR, SCORER
from streams.monitor.settings import MonitorSettings
from streams.service_settings import ServiceSettings

DEPLOY_DIR = Path(__file__).parent
CHART_DIR = DEPLOY_DIR / "helm" / "streamrec"
CATALOG_FILE = CHART_DIR / "files" / "catalog.json"
ALERTS_FILE = DEPLOY_DIR / "prometheus" / "alerts.yml"

# The services scaled on their consumer group's lag, by the topics whose partitions they split.
SCALED: dict[str, tuple[str, type[ServiceSettings], tuple[TopicSpec, ...]]] = {
    "feature-worker": (FEATURE_WORKER, StreamSettings, (INTERACTIONS,)),
    "scorer": (SCORER, ServeSettings, (REC_REQUESTS,)),
    "monitor": (MONITOR, MonitorSettings, (REC_RESPONSES, INTERACTIONS, REC_FEATURES)),
}


def chart_catalog(alerts_file: Path = ALERTS_FILE) -> dict[str, Any]:
    """Topics, principals with their ACLs, scaled consumers and alert groups (unprefixed names:
    the chart prefixes topics with `kafka.topicPrefix`, as STREAMREC_KAFKA__TOPIC_PREFIX does)."""
    return {
        "_generated": "by `streamrec helm catalog` (deploy/chart_catalog.py); do not edit",
        "topics": [
            {"name": spec.name, "partitions": spec.partitions, "config": spec.config()}
            for spec in CATALOG
        ],
        "users": [
            {"principal": principal, "acls": _acls(principal)} for principal in GRANTS
        ],
        "scaled": {
            service: {
                "principal": principal,
                "group": settings.model_fields["group_id"].default,
                "topics": [spec.name for spec in topics],
                "maxReplicas": max(spec.partitions for spec in topics),
            }
            for service, (principal, settings, topics) in SCALED.items()
        },
        "alertGroups": yaml.safe_load(alerts_file.read_text())["groups"],
    }


def _acls(principal: str) -> list[dict[str, Any]]:
    """streams/kafka/acls.py's bindings in Strimzi's terms: LITERAL topics, READ or WRITE, and
    READ on every consumer group (the `*` literal is Kafka's wildcard) for a reader."""
    grant = GRANTS[principal]
    acls = [{"type": "topic", "name": spec.name, "operation": "Read"} for spec in grant.reads]
    acls += [{"type": "topic", "name": spec.name, "operation": "Write"} for spec in grant.writes]
    if grant.reads:
        acls.append({"type": "group", "name": "*", "operation": "Read"})
    return acls


def render(alerts_file: Path = ALERTS_FILE) -> str:
    return json.dumps(chart_catalog(alerts_file), indent=2) + "\n"


def write(path: Path = CATALOG_FILE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render())
    return path
