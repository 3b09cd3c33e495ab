"""Creates the catalog's topics, idempotently (existing topics are left as they are), with the
connection's replication factor and min.insync.replicas."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from schemas.topics import CATALOG, TopicSpec
from streams.kafka.connection import KafkaConnection

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicOutcome:
    name: str
    created: bool
    partitions: int


def create_topics(
    connection: KafkaConnection,
    specs: tuple[TopicSpec, ...] = CATALOG,
    timeout_s: float = 30.0,
) -> list[TopicOutcome]:
    admin = AdminClient(connection.client_config())
    existing = admin.list_topics(timeout=timeout_s).topics
    missing = [s for s in specs if connection.topic(s) not in existing]
    created: set[str] = set()
    if missing:
        futures = admin.create_topics(
            [
                NewTopic(
                    connection.topic(s),
                    num_partitions=s.partitions,
                    replication_factor=connection.replication_factor,
                    config={
                        **s.config(),
                        "min.insync.replicas": str(connection.min_insync_replicas),
                    },
                )
                for s in missing
            ],
            operation_timeout=timeout_s,
        )
        for name, future in futures.items():
            try:
                future.result()
                created.add(name)
                logger.info("created topic=%s", name)
            except KafkaException as exc:
                # Another process may have created it between our list and create: fine.
                if exc.args[0].code() != 36:  # TOPIC_ALREADY_EXISTS
                    raise
    metadata = admin.list_topics(timeout=timeout_s).topics
    return [
        TopicOutcome(
            name=connection.topic(s),
            created=connection.topic(s) in created,
            partitions=len(metadata[connection.topic(s)].partitions)
            if connection.topic(s) in metadata
            else 0,
        )
        for s in specs
    ]
