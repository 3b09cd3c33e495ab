"""The scorer's feature reads on a 3-master Redis Cluster, with the scorer's ACL user.

Features come from the real feature script: applied on the single Redis (the script does not
run on a cluster yet), then every key copied to the cluster with DUMP/RESTORE, one key per
command, so the cluster holds byte for byte what the writer wrote.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import redis

from deploy.local.redis_cluster import LocalRedisCluster
from schemas.recommendations import RecommendationRequest
from serving.feature_reads import FeatureReads
from serving.features import RedisFeatureReader
from serving.item_changes import ItemChanges, masters
from serving.service import ScorerService
from serving.settings import ServeSettings
from streams.feature_worker.batch import PositionedEvent
from streams.features.keys import FeatureKeys
from streams.kafka.connection import KafkaConnection
from streams.redis.connection import RedisConnection, SyncClient
from tests.integration.cluster_nodes import master_of, slot_of
from tests.integration.serving.helpers import (
    FeatureFeed,
    ask,
    events,
    model_update,
    publish,
    request,
    running,
    save_model,
    serving_version,
    settings,
    wait_for,
)
from tests.integration.serving.test_feature_reads import requests, seed
from tests.integration.streams.feature_worker.feature_events import (
    apply_in_batches,
    positioned_events,
)

pytestmark = pytest.mark.cluster


def copy_keys(source: redis.Redis, target: SyncClient, prefix: str) -> int:
    copied = 0
    for key in source.scan_iter(match=f"{prefix}*", count=1000):
        ttl_ms, data = source.pttl(key), source.dump(key)
        assert data is not None  # listed by SCAN, and the test's keys do not expire that soon
        target.restore(key, max(ttl_ms, 0), data, replace=True)
        copied += 1
    return copied


def as_scorer(connection: RedisConnection) -> SyncClient:
    return connection.model_copy(update={"username": "scorer"}).client()


def lean_reads(
    connection: RedisConnection, client: redis.RedisCluster | None = None
) -> FeatureReads:
    scorer = connection.model_copy(update={"username": "scorer"})
    client = client or scorer_cluster_client(connection)
    return FeatureReads(client, "scorer", scorer.resolved_password(), timeout_s=5.0, spin_s=150e-6)


def scorer_cluster_client(connection: RedisConnection) -> redis.RedisCluster:
    client = as_scorer(connection)
    assert isinstance(client, redis.RedisCluster)
    return client


def requests_of(events: list[PositionedEvent]) -> list[RecommendationRequest]:
    pairs = dict.fromkeys((p.event.user_id, p.event.session_id) for p in events)
    return [
        RecommendationRequest(
            request_id=f"r{n}", user_id=user, session_id=session, k=10, sent_at=1.7e9
        )
        for n, (user, session) in enumerate(pairs)
    ]


def test_the_scorer_reads_on_the_cluster_what_it_reads_on_one_redis(
    redis_connection: RedisConnection,
    redis_admin: redis.Redis,
    cluster_connection: RedisConnection,
) -> None:
    events = positioned_events(3000, seed=4)
    apply_in_batches(redis_connection, events)
    prefix = redis_connection.key_prefix
    cluster = cluster_connection.model_copy(update={"key_prefix": prefix})
    cluster_admin = cluster.model_copy(update={"username": "admin"}).client()
    try:
        assert copy_keys(redis_admin, cluster_admin, prefix) > 1000
        batch = requests_of(events)
        single = RedisFeatureReader(as_scorer(redis_connection), prefix)
        clustered = RedisFeatureReader(as_scorer(cluster), prefix)
        lean = RedisFeatureReader(as_scorer(cluster), prefix, reads=lean_reads(cluster))
        expected = single.read(batch)
        actual = clustered.read(batch)
        assert actual == expected
        assert lean.read(batch) == expected
        assert all(c.user_events and c.counters for c in actual.contexts)
        assert all(c.session_events for c in actual.contexts if c.session_id)
        assert actual.popular and actual.popular == expected.popular
        items = sorted({p.event.item_id for p in events})
        assert clustered.categories(items) == single.categories(items)
        assert len(clustered.categories(items)) > 100
        states = single.item_states(items)
        for other in (clustered.item_states(items), lean.item_states(items)):
            for got, expected_array in zip(other, states, strict=True):
                np.testing.assert_array_equal(got, expected_array)
        assert states[2].sum() == len(events)
        # The batch really spans the cluster: its users' keys live on every master.
        keys = FeatureKeys(prefix)
        assert isinstance(cluster_admin, redis.RedisCluster)
        nodes = {master_of(cluster_admin, keys.user(r.user_id)) for r in batch}
        assert len(nodes) == 3
    finally:
        for key in cluster_admin.scan_iter(match=f"{prefix}*", count=1000):
            cluster_admin.delete(key)


def test_seeded_features_read_back_exactly_from_the_cluster(
    cluster_connection: RedisConnection,
) -> None:
    prefix = cluster_connection.key_prefix
    seed(cluster_connection.model_copy(update={"username": "admin"}).client(), prefix)
    reads = lean_reads(cluster_connection)
    features = RedisFeatureReader(as_scorer(cluster_connection), prefix).read(requests())
    assert RedisFeatureReader(as_scorer(cluster_connection), prefix, reads=reads).read(
        requests()
    ) == features
    assert [e.item_id for e in features.contexts[0].user_events] == ["i1", "i2", "i3"]
    assert [e.item_id for e in features.contexts[0].session_events] == ["i2", "i3"]
    assert features.contexts[0].counters["n_view"] == 3.0
    assert features.contexts[1].user_events == ()
    assert features.popular == [("i3", 5.0), ("i2", 4.0), ("i1", 2.0)]
    assert features.config.unavailable == frozenset({"i9"})



def test_a_moved_slot_is_read_through_redis_py_and_the_next_batch_is_lean_again(
    redis_cluster: LocalRedisCluster, cluster_connection: RedisConnection
) -> None:
    prefix = cluster_connection.key_prefix
    admin = cluster_connection.model_copy(update={"username": "admin"}).client()
    keys = [f"{prefix}i:{{item{n}}}" for n in range(30)]
    for n, key in enumerate(keys):
        admin.hset(key, "cat", f"c{n}")
    client = scorer_cluster_client(cluster_connection)
    reads = lean_reads(cluster_connection, client)
    commands = [("HGET", key, "cat") for key in keys]
    expected = [f"c{n}".encode() for n in range(len(keys))]
    assert reads.execute(commands) == expected
    # The client's slot map now sends one key to a master that does not serve it: that master
    # answers MOVED, as it would after a resharding.
    slot, owner = slot_of(client, keys[0]), master_of(client, keys[0])
    other = next(p for p in redis_cluster.ports if not owner.endswith(f":{p}"))
    wrong = client.nodes_manager.get_node(host=redis_cluster.s.host, port=other)
    assert wrong is not None
    client.nodes_manager.slots_cache[slot] = [wrong]
    assert reads.execute(commands) == expected
    assert master_of(client, keys[0]) == owner  # redis-py followed MOVED and learned
    assert reads.execute(commands) == expected


def test_a_dropped_node_connection_raises_once_then_reconnects(
    redis_cluster: LocalRedisCluster, cluster_connection: RedisConnection
) -> None:
    prefix = cluster_connection.key_prefix
    admin = cluster_connection.model_copy(update={"username": "admin"}).client()
    keys = [f"{prefix}i:{{item{n}}}" for n in range(30)]
    for key in keys:
        admin.hset(key, "cat", "c")
    reads = lean_reads(cluster_connection)
    commands = [("HGET", key, "cat") for key in keys]
    assert reads.execute(commands) == [b"c"] * len(keys)
    redis_cluster._node_client(redis_cluster.ports[1]).client_kill_filter(user="scorer")
    with pytest.raises(redis.ConnectionError):
        reads.execute(commands)
    assert reads.execute(commands) == [b"c"] * len(keys)


def test_the_scorer_reads_a_cluster_through_its_lean_per_master_round_trip(
    cluster_connection: RedisConnection,
) -> None:
    settings = ServeSettings(redis=cluster_connection.model_copy(update={"username": "scorer"}))
    reads = FeatureReads.connect(settings.redis, settings.redis.client(), spin_s=0.0)
    assert reads.cluster


def test_writes_to_items_on_every_master_are_reported_to_the_scorer_service(
    cluster_connection: RedisConnection,
) -> None:
    prefix = cluster_connection.key_prefix
    admin = cluster_connection.model_copy(update={"username": "admin"}).client()
    assert isinstance(admin, redis.RedisCluster)
    items = [f"item{n}" for n in range(30)]
    keys = FeatureKeys(prefix)
    assert len({master_of(admin, keys.item(i)) for i in items}) == 3
    settings = ServeSettings(redis=cluster_connection.model_copy(update={"username": "scorer"}))
    client = settings.redis.client()
    found = masters(settings.redis, client)
    assert len(found()) == 3
    changes = ItemChanges(found, keys, "scorer", settings.redis.resolved_password(), 5.0)
    try:
        assert changes.changed() is None
        for item in items:
            admin.hincrby(keys.item(item), "n_view", 1)
        seen: set[str] = set()
        deadline = time.monotonic() + 10
        while len(seen) < len(items) and time.monotonic() < deadline:
            changed = changes.changed()
            assert changed is not None
            seen.update(changed)
            time.sleep(0.01)
        assert seen == set(items)
    finally:
        changes.close()
        client.close()
        for item in items:
            admin.delete(keys.item(item))


@pytest.mark.e2e
def test_the_scorer_answers_from_features_on_the_cluster(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    redis_admin: redis.Redis,
    cluster_connection: RedisConnection,
    tmp_path: Path,
) -> None:
    feed = FeatureFeed(kafka, redis_connection)
    crowd = [
        e for n in range(10) for e in events(f"crowd{n}", [f"i{100 + m}" for m in range(n + 3)])
    ]
    feed.ingest([*crowd, *events("u1", ["i1", "i2", "i3", "i4", "i5"])])
    prefix = redis_connection.key_prefix
    cluster = cluster_connection.model_copy(update={"key_prefix": prefix})
    cluster_admin = cluster.model_copy(update={"username": "admin"}).client()
    try:
        copy_keys(redis_admin, cluster_admin, prefix)
        for key in redis_admin.scan_iter(match=f"{prefix}*", count=1000):
            redis_admin.delete(key)  # nothing left to read on the single Redis
        publish(kafka, model_update(save_model(tmp_path, "1.0"), "1.0"))
        scorer = cluster.model_copy(update={"username": "scorer"})
        service = ScorerService(settings(kafka, scorer, tmp_path))
        reads = service.reader._reads
        assert isinstance(reads, FeatureReads) and reads.cluster
        with running(service):
            assert wait_for(lambda: serving_version(service) == "1.0")
            known = ask(kafka, request("u1", k=20))
            unknown = ask(kafka, request("nobody", k=3, session_id=None))
        assert known.status == "ok" and known.strategy == "model"
        assert len(known.items) == 20
        assert not {i.item_id for i in known.items} & {"i1", "i2", "i3", "i4", "i5"}
        assert known.feature_freshness_ms is not None
        assert unknown.strategy == "popularity"
        assert [i.item_id for i in unknown.items] == ["i100", "i101", "i102"]
    finally:
        for key in cluster_admin.scan_iter(match=f"{prefix}*", count=1000):
            cluster_admin.delete(key)
