"""Kafka + Redis together: what `streamrec up`, `down` and `status` do.

With `redis_cluster` set (STREAMREC_LOCAL__REDIS_CLUSTER=3), a local Redis Cluster runs beside the
single Redis: services reach it with STREAMREC_REDIS__CLUSTER=true and one node's port; the
single Redis stays for what is not cluster-aware (operators' tools, benchmarks)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from deploy.local.kafka import LocalKafka
from deploy.local.process import ServiceState
from deploy.local.redis import LocalRedis
from deploy.local.redis_cluster import LocalRedisCluster
from deploy.local.settings import LocalStackSettings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class UpReport:
    started: tuple[str, ...]
    """Services this call started (a later `down` by the same caller stops exactly these)."""
    states: tuple[ServiceState, ...]


class LocalStack:
    def __init__(self, settings: LocalStackSettings) -> None:
        self.settings = settings
        self.kafka = LocalKafka(settings)
        self.redis = LocalRedis(settings)
        self.redis_cluster = LocalRedisCluster(settings)

    def up(self) -> UpReport:
        """Start what is not running, then wait until both answer. Harmless when already up."""
        self.settings.home.mkdir(parents=True, exist_ok=True)
        started = []
        # Redis first: it is up in milliseconds while the JVM is still starting.
        if self.redis.start():
            started.append("redis")
        if self.redis_cluster.start():
            started.append("redis-cluster")
        if self.kafka.start():
            started.append("kafka")
        self.redis.wait_healthy(self.settings.start_timeout_s)
        self.redis_cluster.wait_healthy(self.settings.start_timeout_s)
        self.kafka.wait_healthy(self.settings.start_timeout_s)
        self.kafka.ensure_credentials()
        return UpReport(tuple(started), self.status())

    def down(self, only: tuple[str, ...] | None = None) -> list[str]:
        """Stop what streamrec started (found by pid file); anything else is left alone."""
        stopped = []
        services = (
            ("kafka", self.kafka), ("redis", self.redis), ("redis-cluster", self.redis_cluster)
        )
        for name, service in services:
            if (only is None or name in only) and service.stop():
                stopped.append(name)
        return stopped

    def status(self) -> tuple[ServiceState, ...]:
        states = (self.kafka.state(), self.redis.state())
        return (*states, self.redis_cluster.state()) if self.settings.redis_cluster else states
