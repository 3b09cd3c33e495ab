"""Grants each principal its topics (streams/kafka/principals.py) as broker ACLs, idempotently.

Topic ACLs are LITERAL on the prefixed names, so a grant under one prefix (a test's, a demo
run's) never reaches another prefix's topics, and `interactions` never covers
`interactions.dlq` the way a PREFIXED pattern would. Consumer groups are granted by the wildcard:
group names are chosen per deployment, run and test, and a group gives nothing beyond the topics
its member may read anyway (the most a stolen credential can do with a group is disturb it).
"""

from __future__ import annotations

import logging
import time

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from streams.kafka.connection import KafkaConnection
from streams.kafka.principals import GRANTS, Grants

logger = logging.getLogger(__name__)

ANY_HOST = "*"


def _allow(resource: ResourceType, name: str, principal: str, op: AclOperation) -> AclBinding:
    return AclBinding(
        resource, name, ResourcePatternType.LITERAL, f"User:{principal}", ANY_HOST, op,
        AclPermissionType.ALLOW,
    )


def bindings(connection: KafkaConnection, grants: dict[str, Grants] = GRANTS) -> list[AclBinding]:
    """Every ACL the principals need on the catalog under `connection`'s topic prefix."""
    out = []
    for principal, grant in grants.items():
        for spec in grant.reads:
            out.append(_allow(ResourceType.TOPIC, connection.topic(spec), principal,
                              AclOperation.READ))
        for spec in grant.writes:
            out.append(_allow(ResourceType.TOPIC, connection.topic(spec), principal,
                              AclOperation.WRITE))
        if grant.reads:
            out.append(_allow(ResourceType.GROUP, "*", principal, AclOperation.READ))
    return out


def grant_acls(admin_connection: KafkaConnection, timeout_s: float = 30.0) -> int:
    """Creates the ACLs (the broker keeps one copy of an ACL created twice) and waits until the
    broker enforces them; returns how many bindings were asked for. `admin_connection` must log
    in as a super user."""
    wanted = bindings(admin_connection)
    admin = AdminClient(admin_connection.client_config())
    for future in admin.create_acls(wanted, request_timeout=timeout_s).values():
        future.result()
    _wait_enforced(admin, wanted, timeout_s)
    logger.info("acls granted prefix=%s bindings=%d", admin_connection.topic_prefix, len(wanted))
    return len(wanted)


def _key(binding: AclBinding) -> tuple[object, ...]:
    return (binding.restype, binding.name, binding.resource_pattern_type, binding.principal,
            binding.host, binding.operation, binding.permission_type)


def _wait_enforced(admin: AdminClient, wanted: list[AclBinding], timeout_s: float) -> None:
    # The controller commits the ACLs before it answers; the broker's authorizer applies them
    # when the metadata reaches it, a moment later. Until then a client would be refused.
    resources = {(b.restype, b.name) for b in wanted}
    missing = {_key(b) for b in wanted}
    deadline = time.monotonic() + timeout_s
    while missing:
        for restype, name in resources:
            # None matches any principal and host (the stubs type them as str only).
            any_binding = AclBindingFilter(
                restype, name, ResourcePatternType.LITERAL, None, None,  # type: ignore[arg-type]
                AclOperation.ANY, AclPermissionType.ANY,
            )
            found = admin.describe_acls(
                any_binding,
                request_timeout=timeout_s,
            ).result()
            missing -= {_key(b) for b in found}
        if missing and time.monotonic() > deadline:
            raise TimeoutError(f"{len(missing)} ACLs not enforced after {timeout_s}s")
        if missing:
            time.sleep(0.1)
