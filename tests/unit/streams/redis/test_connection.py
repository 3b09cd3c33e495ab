"""Which client a service's Redis settings build: one Redis, or a Redis Cluster."""

from __future__ import annotations

import pytest
import redis
import redis.asyncio as aioredis
from pydantic import SecretStr

from serving.feature_reads import FeatureReads
from serving.settings import ServeSettings
from streams.redis.connection import RedisConnection


def test_by_default_a_service_talks_to_one_redis() -> None:
    connection = RedisConnection()
    assert not connection.cluster
    assert type(connection.client()) is redis.Redis
    assert type(connection.async_client()) is aioredis.Redis


def test_the_cluster_flag_comes_from_the_services_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STREAMREC_REDIS__CLUSTER", "true")
    monkeypatch.setenv("STREAMREC_REDIS__PORT", "7001")
    settings = ServeSettings()
    assert settings.redis.cluster
    assert settings.redis.port == 7001
    assert settings.redis.username == "scorer"  # the service's own ACL user still applies


def test_a_cluster_connection_builds_redis_pys_cluster_client_with_the_acl_user() -> None:
    connection = RedisConnection(
        port=7001, cluster=True, username="scorer", password=SecretStr("pw")
    )
    client = connection.async_client()  # the asyncio client finds the nodes on first use
    assert isinstance(client, aioredis.RedisCluster)
    assert [(n.host, n.port) for n in client.startup_nodes] == [("127.0.0.1", 7001)]
    node_kwargs = client.connection_kwargs
    assert (node_kwargs["username"], node_kwargs["password"]) == ("scorer", "pw")


def test_the_sync_cluster_client_asks_its_startup_node_for_the_slots() -> None:
    # Nothing listens on port 1: a plain Redis client would be built without connecting, a
    # cluster client fails at once because it needs the slot map before its first command.
    with pytest.raises(redis.RedisClusterException):
        RedisConnection(port=1, cluster=True, socket_timeout_s=0.5).client()


def test_on_one_redis_the_scorer_reads_through_the_lean_pipeline() -> None:
    settings = ServeSettings(redis=RedisConnection(username="scorer"))
    reads = FeatureReads.connect(settings.redis, settings.redis.client(), spin_s=0.0)
    assert not reads.cluster
