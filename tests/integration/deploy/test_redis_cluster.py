"""The local Redis Cluster `streamrec up` starts with STREAMREC_LOCAL__REDIS_CLUSTER=3."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from deploy.local.process import port_open
from deploy.local.redis_cluster import LocalRedisCluster
from deploy.local.settings import LocalStackSettings
from deploy.local.stack import LocalStack
from streams.features.keys import FeatureKeys
from streams.redis.connection import RedisConnection
from tests.integration.cluster_nodes import master_of, master_ports, replica_count, slot_of

pytestmark = pytest.mark.cluster

SLOTS = 16384


def test_three_masters_share_every_slot(redis_cluster: LocalRedisCluster) -> None:
    client = redis_cluster.connection("admin").client()
    assert isinstance(client, redis.RedisCluster)
    assert master_ports(client) == list(redis_cluster.ports)
    assert replica_count(client) == 0
    ranges = client.cluster_slots()
    assert sum(end - start + 1 for start, end in ranges) == SLOTS
    for port in redis_cluster.ports:
        info = redis_cluster._cluster_info(port)
        assert info["cluster_state"] == "ok"
        assert info["cluster_slots_assigned"] == str(SLOTS)


def test_every_node_runs_with_aof_and_no_eviction(redis_cluster: LocalRedisCluster) -> None:
    for port in redis_cluster.ports:
        config = redis_cluster._node_client(port).config_get("*")
        assert config["appendonly"] == "yes"
        assert config["appendfsync"] == "everysec"
        assert config["maxmemory-policy"] == "noeviction"
        assert config["cluster-enabled"] == "yes"


def test_service_users_are_those_of_the_single_redis(
    redis_cluster: LocalRedisCluster, cluster_connection: RedisConnection
) -> None:
    item = FeatureKeys(cluster_connection.key_prefix).item("probe")
    cluster_connection.client().hset(item, "cat", "c1")
    scorer = cluster_connection.model_copy(update={"username": "scorer"}).client()
    assert scorer.hget(item, "cat") == b"c1"
    with pytest.raises(redis.exceptions.NoPermissionError):
        scorer.hset(item, "cat", "c2")
    with pytest.raises(redis.exceptions.NoPermissionError):
        cluster_connection.client().set("elsewhere", "1")
    for port in redis_cluster.ports:
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis(port=port, socket_timeout=2).ping()


def test_a_second_up_starts_nothing_and_reports_the_cluster(
    redis_cluster: LocalRedisCluster,
) -> None:
    settings = LocalStackSettings(redis_cluster=3)
    again = LocalRedisCluster(settings)
    assert again.start() is False
    again.wait_healthy(10)
    states = {s.name: s for s in LocalStack(settings).status()}
    assert states["redis-cluster"].running
    assert states["redis-cluster"].address == redis_cluster.address


def test_an_entity_keeps_one_slot_and_entities_spread_over_every_master(
    cluster_connection: RedisConnection,
) -> None:
    keys = FeatureKeys(cluster_connection.key_prefix)
    client = cluster_connection.client()
    assert isinstance(client, redis.RedisCluster)
    for user in ("u1", "u{2}", "{}"):
        assert slot_of(client, keys.user(user)) == slot_of(client, keys.user_sequence(user))
    assert slot_of(client, keys.session("s1")) == slot_of(client, keys.session_sequence("s1"))
    masters = {master_of(client, keys.user(f"u{n}")) for n in range(100)}
    assert len(masters) == 3


def test_raising_the_setting_adds_masters_and_moves_keys_onto_them(tmp_path: Path) -> None:
    # Its own folder and ports (past any cluster a session or a developer runs): 3, then 4.
    three = LocalStackSettings(
        home=tmp_path, redis_cluster=3,
        redis_cluster_port=LocalStackSettings().redis_cluster_port + 20,
    )
    four = LocalStackSettings(home=tmp_path, redis_cluster=4,
                              redis_cluster_port=three.redis_cluster_port)
    assert not any(port_open(three.host, port) for port in four.redis_cluster_ports)
    grown = LocalRedisCluster(four)
    try:
        small = LocalRedisCluster(three)
        small.start()
        small.wait_healthy(60)
        keys = FeatureKeys("sr:")
        admin = small.connection("admin").client()
        for n in range(400):
            admin.hset(keys.user(f"u{n}"), "n", n)
        assert grown.start()
        grown.wait_healthy(120)
        client = grown.connection("admin").client()
        assert isinstance(client, redis.RedisCluster)
        assert master_ports(client) == list(four.redis_cluster_ports)
        assert [client.hget(keys.user(f"u{n}"), "n") for n in range(400)] == [
            str(n).encode() for n in range(400)
        ]
        assert grown._node_client(four.redis_cluster_ports[3]).dbsize() > 50
    finally:
        grown.stop()
