"""The topic catalog: every topic's name, key, value contract, partitions and retention.

`streamrec topics create` makes exactly these; nothing else in the code spells a topic name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel

from schemas.alerts import DriftAlert
from schemas.catalog import CatalogItem
from schemas.deadletter import DeadLetter
from schemas.events import InteractionEvent
from schemas.kpi import KpiReport
from schemas.model_updates import ModelUpdate
from schemas.ranker_examples import RankerExample, ServedFeatures
from schemas.recommendations import RecommendationRequest, RecommendationResponse

_DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class TopicSpec:
    name: str
    key: str
    value: type[BaseModel] | None
    """The records' contract; None for a service's state changelog, whose rows keep records of
    several contracts as they were read."""
    partitions: int
    retention_ms: int
    """-1 keeps records forever (compacted topics)."""
    cleanup_policy: Literal["delete", "compact", "compact,delete"] = "delete"
    extra_config: dict[str, str] = field(default_factory=dict)

    def config(self) -> dict[str, str]:
        return {
            "cleanup.policy": self.cleanup_policy,
            "retention.ms": str(self.retention_ms),
            **self.extra_config,
        }


INTERACTIONS = TopicSpec(
    # Long retention: a full retrain replays a window of history from here.
    "interactions",
    "user_id",
    InteractionEvent,
    partitions=4,
    retention_ms=90 * _DAY_MS,
)
INTERACTIONS_DLQ = TopicSpec(
    "interactions.dlq",
    "original key",
    DeadLetter,
    partitions=1,
    retention_ms=30 * _DAY_MS,
    # A dead letter wraps the rejected bytes, which may themselves have been oversized.
    extra_config={"max.message.bytes": str(DeadLetter.WIRE_MAX_BYTES)},
)
REC_REQUESTS = TopicSpec(
    "rec.requests", "user_id", RecommendationRequest, partitions=4, retention_ms=_DAY_MS
)
REC_REQUESTS_DLQ = TopicSpec(
    "rec.requests.dlq",
    "original key",
    DeadLetter,
    partitions=1,
    retention_ms=30 * _DAY_MS,
    extra_config={"max.message.bytes": str(DeadLetter.WIRE_MAX_BYTES)},
)
REC_RESPONSES = TopicSpec(
    "rec.responses", "user_id", RecommendationResponse, partitions=4, retention_ms=_DAY_MS
)
# Compacted per version (`<model>/<version>`, schemas/model_log.py). An hour's segments let the
# cleaner keep the log to about one record per version (the active segment is never cleaned),
# and tombstones of retired versions stay an hour: far longer than a reader takes to read it all.
MODEL_UPDATES = TopicSpec(
    "model.updates",
    "<model>/<version>",
    ModelUpdate,
    partitions=1,
    retention_ms=-1,
    cleanup_policy="compact",
    extra_config={"segment.ms": str(3_600_000), "delete.retention.ms": str(3_600_000)},
)
KPI_METRICS = TopicSpec(
    "kpi.metrics", "model_version", KpiReport, partitions=1, retention_ms=30 * _DAY_MS
)
ALERTS_DRIFT = TopicSpec(
    "alerts.drift", "detector", DriftAlert, partitions=1, retention_ms=30 * _DAY_MS
)
# Keyed and partitioned like rec.responses and interactions: the monitor joins all three per user.
REC_FEATURES = TopicSpec(
    "rec.features", "user_id", ServedFeatures, partitions=4, retention_ms=_DAY_MS
)
# The ranker's training window is replayed from here after a restart.
RANKER_EXAMPLES = TopicSpec(
    "ranker.examples", "user_id", RankerExample, partitions=4, retention_ms=7 * _DAY_MS
)

# The monitor's join and KPI-window state (streams/monitor/state.py): the changelog of its faust
# table, partitioned like the inputs it joins. Compacted, and deleting what is older than the
# longest attribution window allowed plus a day, so an abandoned row does not stay forever.
MONITOR_STATE = TopicSpec(
    "monitor.state.changelog",
    "state row",
    None,
    partitions=4,
    retention_ms=8 * _DAY_MS,
    cleanup_policy="compact,delete",
)

# What applications know about their items (genres, release year): the rankers' content
# features. Compacted, and read whole by every scorer at each start, like model.updates.
CATALOG_ITEMS = TopicSpec(
    "catalog.items",
    "item_id",
    CatalogItem,
    partitions=1,
    retention_ms=-1,
    cleanup_policy="compact",
)


def _dead_letters(source: TopicSpec) -> TopicSpec:
    return TopicSpec(
        f"{source.name}.dlq",
        "original key",
        DeadLetter,
        partitions=1,
        retention_ms=30 * _DAY_MS,
        # A dead letter wraps the rejected bytes, which may themselves have been oversized.
        extra_config={"max.message.bytes": str(DeadLetter.WIRE_MAX_BYTES)},
    )


# Control topics are read from the beginning by every scorer at each start, so one bad record
# there is dead-lettered once per reader start: its (topic, partition, offset) identifies repeats.
MODEL_UPDATES_DLQ = _dead_letters(MODEL_UPDATES)
KPI_METRICS_DLQ = _dead_letters(KPI_METRICS)
ALERTS_DRIFT_DLQ = _dead_letters(ALERTS_DRIFT)
REC_FEATURES_DLQ = _dead_letters(REC_FEATURES)
RANKER_EXAMPLES_DLQ = _dead_letters(RANKER_EXAMPLES)
CATALOG_ITEMS_DLQ = _dead_letters(CATALOG_ITEMS)

CATALOG: tuple[TopicSpec, ...] = (
    INTERACTIONS,
    INTERACTIONS_DLQ,
    REC_REQUESTS,
    REC_REQUESTS_DLQ,
    REC_RESPONSES,
    MODEL_UPDATES,
    MODEL_UPDATES_DLQ,
    KPI_METRICS,
    KPI_METRICS_DLQ,
    ALERTS_DRIFT,
    ALERTS_DRIFT_DLQ,
    REC_FEATURES,
    REC_FEATURES_DLQ,
    RANKER_EXAMPLES,
    RANKER_EXAMPLES_DLQ,
    CATALOG_ITEMS,
    CATALOG_ITEMS_DLQ,
    MONITOR_STATE,
)


def dead_letter_topic(source: str) -> str:
    """Where records rejected from `source` go (by convention `<source>.dlq`)."""
    return f"{source}.dlq"
