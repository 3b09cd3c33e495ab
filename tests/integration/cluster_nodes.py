"""Where a Redis Cluster keeps a key, asked of redis-py's cluster client (typed for the tests)."""

from __future__ import annotations

import redis


def master_of(client: redis.RedisCluster, key: str) -> str:
    """host:port of the master serving `key`'s slot."""
    node = client.get_node_from_key(key)  # type: ignore[no-untyped-call]
    return str(node.name)


def slot_of(client: redis.RedisCluster, key: str) -> int:
    return int(client.keyslot(key))  # type: ignore[no-untyped-call]


def master_ports(client: redis.RedisCluster) -> list[int]:
    return sorted(node.port for node in client.get_primaries())  # type: ignore[no-untyped-call]


def replica_count(client: redis.RedisCluster) -> int:
    return len(client.get_replicas())  # type: ignore[no-untyped-call]
