"""The base every service's settings object derives from: one env prefix, frozen, strict.

A service builds its settings once at start (`XSettings()` reads `STREAMREC_*` variables, nested
fields with `__`, e.g. `STREAMREC_KAFKA__BOOTSTRAP_SERVERS`) and passes the object down.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from streams.kafka.connection import KafkaConnection
from streams.redis_connection import RedisConnection


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="STREAMREC_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    kafka: KafkaConnection = Field(default_factory=KafkaConnection)
    redis: RedisConnection = Field(default_factory=RedisConnection)
    metrics_port: int = Field(
        0, ge=0, le=65535, description="Prometheus /metrics HTTP port on 127.0.0.1; 0 disables it."
    )
