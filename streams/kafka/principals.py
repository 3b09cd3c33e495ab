"""Who may do what on Kafka: one SASL principal per role, each granted only what it does.

The broker denies whatever no ACL allows (`allow.everyone.if.no.acl.found=false`), so this table
is the whole of what each credential can do. `admin` (topics, ACLs, credentials) and `broker`
(the broker's own connections) are super users configured on the broker and appear here only by
name; they need no ACL.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.topics import (
    ALERTS_DRIFT,
    ALERTS_DRIFT_DLQ,
    CATALOG,
    CATALOG_ITEMS,
    CATALOG_ITEMS_DLQ,
    INTERACTIONS,
    INTERACTIONS_DLQ,
    KPI_METRICS,
    KPI_METRICS_DLQ,
    MODEL_UPDATES,
    MODEL_UPDATES_DLQ,
    MONITOR_STATE,
    RANKER_EXAMPLES,
    RANKER_EXAMPLES_DLQ,
    REC_FEATURES,
    REC_FEATURES_DLQ,
    REC_REQUESTS,
    REC_REQUESTS_DLQ,
    REC_RESPONSES,
    TopicSpec,
)

ADMIN = "admin"
"""Creates topics, ACLs and credentials (`streamrec up`, `streamrec topics create`, tests)."""
BROKER = "broker"
"""The broker's own inter-broker and controller connections."""
SUPER_USERS = (ADMIN, BROKER)

APP = "app"
OPERATOR = "operator"
FEATURE_WORKER = "feature-worker"
TRAINER = "trainer"
SCORER = "scorer"
MONITOR = "monitor"
ARCHIVER = "archiver"


@dataclass(frozen=True)
class Grants:
    reads: tuple[TopicSpec, ...]
    """READ on these topics (DESCRIBE comes with it) and READ on consumer groups."""
    writes: tuple[TopicSpec, ...]
    """WRITE on these topics; on Kafka >= 3.0 WRITE on any topic also allows the idempotent
    producer's InitProducerId, so no cluster-wide IDEMPOTENT_WRITE is granted."""


GRANTS: dict[str, Grants] = {
    # An application: sends interactions, requests and its items' metadata, reads answers,
    # KPIs and alerts.
    APP: Grants(
        reads=(REC_RESPONSES, KPI_METRICS, ALERTS_DRIFT),
        writes=(INTERACTIONS, REC_REQUESTS, CATALOG_ITEMS),
    ),
    # Looks at everything (dead letters included), changes nothing.
    OPERATOR: Grants(reads=CATALOG, writes=()),
    FEATURE_WORKER: Grants(reads=(INTERACTIONS,), writes=(INTERACTIONS_DLQ,)),
    # The only writer of model versions outside the canary's decisions (it follows
    # model.updates to know what serves); dead-letters the drift alerts it cannot accept.
    TRAINER: Grants(
        reads=(INTERACTIONS, ALERTS_DRIFT, RANKER_EXAMPLES, MODEL_UPDATES),
        writes=(MODEL_UPDATES, ALERTS_DRIFT_DLQ, RANKER_EXAMPLES_DLQ),
    ),
    # Writes model.updates only for its canary's promote and rollback decisions; dead-letters
    # what it cannot accept from each topic it reads.
    SCORER: Grants(
        reads=(REC_REQUESTS, MODEL_UPDATES, KPI_METRICS, CATALOG_ITEMS),
        writes=(
            REC_RESPONSES, REC_FEATURES, REC_REQUESTS_DLQ, MODEL_UPDATES, MODEL_UPDATES_DLQ,
            KPI_METRICS_DLQ, CATALOG_ITEMS_DLQ,
        ),
    ),
    # The only writer of KPIs, drift alerts and labelled ranker examples; dead-letters the
    # feature logs it cannot accept; keeps its join state in its faust table's changelog
    # (written as it runs, read back on assignment).
    MONITOR: Grants(
        reads=(REC_RESPONSES, INTERACTIONS, REC_FEATURES, MONITOR_STATE),
        writes=(KPI_METRICS, ALERTS_DRIFT, RANKER_EXAMPLES, REC_FEATURES_DLQ, MONITOR_STATE),
    ),
    # The window archive's compaction job: copies interactions to Parquet, dead-letters what it
    # cannot decode.
    ARCHIVER: Grants(reads=(INTERACTIONS,), writes=(INTERACTIONS_DLQ,)),
}

PRINCIPALS: tuple[str, ...] = (*SUPER_USERS, *GRANTS)
"""Every principal `streamrec up` makes a credential for."""
