"""The base every service's settings object derives from: one env prefix, frozen, strict.

A service builds its settings once at start (`XSettings()` reads `STREAMREC_*` variables, nested
fields with `__`, e.g. `STREAMREC_KAFKA__BOOTSTRAP_SERVERS`) and passes the object down. Each
service logs in to Kafka as its own principal (`KAFKA_PRINCIPAL`) and to Redis as its own ACL user
(`REDIS_USER`) unless the settings name others, even when other connection variables are set.
"""

from __future__ import annotations

import logging
import os
from typing import Any, ClassVar

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.limits import DEFAULT_MAX_FUTURE_SKEW_S
from streams.kafka.connection import KafkaConnection
from streams.redis.connection import RedisConnection

logger = logging.getLogger(__name__)


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="STREAMREC_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    KAFKA_PRINCIPAL: ClassVar[str | None] = None
    """The principal this service logs in as when `kafka.sasl_username` is unset."""
    REDIS_USER: ClassVar[str | None] = None
    """The Redis ACL user this service logs in as when `redis.username` is unset."""

    kafka: KafkaConnection = Field(default_factory=KafkaConnection)
    redis: RedisConnection = Field(default_factory=RedisConnection)
    metrics_port: int = Field(
        0, ge=0, le=65535, description="Prometheus /metrics HTTP port; 0 disables it."
    )
    metrics_host: str = Field(
        "127.0.0.1", min_length=1, max_length=253, description="Address /metrics binds: the "
        "loopback on a shared host; 0.0.0.0 in a Kubernetes pod, whose address Prometheus "
        "scrapes and the kubelet probes.",
    )
    max_future_skew_s: float = Field(
        DEFAULT_MAX_FUTURE_SKEW_S, gt=0.0, le=86_400.0, description="How far ahead of this "
        "process's clock a timestamp in a consumed record may be (seconds). Beyond it the record "
        "is dead-lettered: an event dated hours ahead would empty time-bucketed features and "
        "advance event-time watermarks. Allow for the producers' clock error, not more.",
    )
    cpu_nice: int = Field(
        0, ge=0, le=19, description="CPU scheduling niceness the process takes at start. On a "
        "host shared with the latency-bound scorer, throughput services (feature workers, "
        "trainer, monitor) at e.g. 10 yield the CPU to it when a request arrives and still use "
        "every idle cycle (the role of cpu.weight / QoS classes under an orchestrator).",
    )

    @model_validator(mode="before")
    @classmethod
    def _own_redis_user(cls, data: Any) -> Any:
        user = cls.REDIS_USER
        if user is None or not isinstance(data, dict):
            return data
        redis = data.get("redis", {})
        if isinstance(redis, RedisConnection) and "username" not in redis.model_fields_set:
            return {**data, "redis": redis.model_copy(update={"username": user})}
        if isinstance(redis, dict) and redis.get("username") is None:
            return {**data, "redis": {**redis, "username": user}}
        return data

    @model_validator(mode="before")
    @classmethod
    def _own_kafka_principal(cls, data: Any) -> Any:
        # Before validation: `kafka` may come from variables (a dict holding only what was set)
        # or as an object; either way an unset principal becomes this service's own.
        principal = cls.KAFKA_PRINCIPAL
        if principal is None or not isinstance(data, dict):
            return data
        kafka = data.get("kafka", {})
        if isinstance(kafka, KafkaConnection):
            return {**data, "kafka": kafka.with_default_principal(principal)}
        if isinstance(kafka, dict) and kafka.get("sasl_username") is None:
            return {**data, "kafka": {**kafka, "sasl_username": principal}}
        return data

    def apply_cpu_nice(self) -> None:
        """Lowers this process's CPU priority to `cpu_nice` (never raises it: that needs
        privileges a service should not hold)."""
        current = os.nice(0)
        if self.cpu_nice > current:
            os.nice(self.cpu_nice - current)
            logger.info("cpu priority lowered nice=%d", self.cpu_nice)
