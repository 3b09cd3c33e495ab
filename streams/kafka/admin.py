"""Creates the catalog's topics, idempotently (existing topics are left as they are), with the
connection's replication factor and min.insync.replicas; tells where a topic's partitions end."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # type: ignore[attr-defined]

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


def delete_topics(
    connection: KafkaConnection,
    specs: tuple[TopicSpec, ...] = CATALOG,
    timeout_s: float = 30.0,
) -> None:
    """Deletes the catalog's topics under `connection`'s prefix (those that exist)."""
    admin = AdminClient(connection.client_config())
    existing = admin.list_topics(timeout=timeout_s).topics
    names = [connection.topic(s) for s in specs if connection.topic(s) in existing]
    if names:
        for future in admin.delete_topics(names, operation_timeout=timeout_s).values():
            future.result()


def end_offsets(connection: KafkaConnection, topic: str, timeout_s: float = 10.0) -> dict[int, int]:
    """Each non-empty partition's end (the offset its next record will get), asked through an
    admin client: a consumer busy polling in another thread answers such queries late."""
    admin = AdminClient(connection.client_config())
    partitions = list(admin.list_topics(topic, timeout=timeout_s).topics[topic].partitions)
    starts = _listed(admin, topic, partitions, OffsetSpec.earliest(), timeout_s)  # type: ignore[no-untyped-call]
    ends = _listed(admin, topic, partitions, OffsetSpec.latest(), timeout_s)  # type: ignore[no-untyped-call]
    return {p: end for p, end in ends.items() if end > starts[p]}


def _listed(
    admin: AdminClient, topic: str, partitions: list[int], spec: Any, timeout_s: float
) -> dict[int, int]:
    asked = {TopicPartition(topic, p): spec for p in partitions}
    futures = admin.list_offsets(asked, request_timeout=timeout_s)
    return {tp.partition: int(f.result(timeout=timeout_s).offset) for tp, f in futures.items()}
