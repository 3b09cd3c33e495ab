"""The base every service's settings object derives from: one env prefix, frozen, strict.

A service builds its settings once at start (`XSettings()` reads `STREAMREC_*` variables, nested
fields with `__`, e.g. `STREAMREC_KAFKA__BOOTSTRAP_SERVERS`) and passes the object down.
"""

from __future__ import annotations

import logging
import os

from pydantic import Field
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

    kafka: KafkaConnection = Field(default_factory=KafkaConnection)
    redis: RedisConnection = Field(default_factory=RedisConnection)
    metrics_port: int = Field(
        0, ge=0, le=65535, description="Prometheus /metrics HTTP port on 127.0.0.1; 0 disables it."
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

    def apply_cpu_nice(self) -> None:
        """Lowers this process's CPU priority to `cpu_nice` (never raises it: that needs
        privileges a service should not hold)."""
        current = os.nice(0)
        if self.cpu_nice > current:
            os.nice(self.cpu_nice - current)
            logger.info("cpu priority lowered nice=%d", self.cpu_nice)
