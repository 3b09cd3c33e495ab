"""Settings of the local stack (`streamrec up/down/status`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from streams.service_settings import refuse_unknown, unknown_variables

DEPLOY_DIR = Path(__file__).resolve().parent.parent


class LocalStackSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="STREAMREC_LOCAL__", extra="forbid", frozen=True, hide_input_in_errors=True
    )

    home: Path = Field(
        Path(".streamrec"), description="Data, logs, pids and secrets (git-ignored)."
    )
    host: str = Field("127.0.0.1", description="Both services bind here only.")
    kafka_port: int = Field(9092, ge=1, le=65535)
    kafka_controller_port: int = Field(9093, ge=1, le=65535)
    kafka_tls_port: int = Field(
        0, ge=0, le=65535, description="The SASL_SSL listener's port; 0: kafka_port + 2 (so "
        "stacks on different ports never share it).",
    )
    kafka_heap_mb: int = Field(
        768, ge=256, le=16384, description="JVM heap; sized for a 2-core, shared machine."
    )
    kafka_partitions_default: int = Field(4, ge=1, le=64)
    # Every hand-off between broker threads is a sleep and a wake-up, ~30 us of CPU each on a
    # small VM: one network and one request thread keep a busy thread busy, which costs the
    # broker less CPU and the scorer's requests less latency than 2 or 4 on 2 cores.
    kafka_network_threads: int = Field(
        1, ge=1, le=64, description="num.network.threads; raise it on a many-core host."
    )
    kafka_io_threads: int = Field(
        1, ge=1, le=64, description="num.io.threads; raise it on a many-core host."
    )
    redis_port: int = Field(6379, ge=1, le=65535)
    redis_maxmemory_mb: int = Field(2048, ge=64, description="Bounded memory, LRU off: noeviction.")
    redis_cluster: int = Field(
        0, ge=0, le=16, description="Masters of a local Redis Cluster `up` starts beside the "
        "single Redis (no replicas); 0: none. At least 3 (Redis Cluster's minimum).",
    )
    redis_cluster_port: int = Field(
        7001, ge=1, le=55535, description="The cluster's first node; node i listens on "
        "redis_cluster_port + i and its cluster bus on that + 10000.",
    )
    start_timeout_s: float = Field(90.0, gt=0, description="How long `up` waits for health.")
    pom: Path = Field(DEPLOY_DIR / "kafka" / "pom.xml", description="Pins the Kafka version.")

    @model_validator(mode="before")
    @classmethod
    def _no_unknown_variables(cls, data: Any) -> Any:
        prefix = str(cls.model_config.get("env_prefix"))
        refuse_unknown(unknown_variables(prefix, cls.model_fields, False), "local stack")
        return data

    @field_validator("redis_cluster")
    @classmethod
    def _cluster_size(cls, masters: int) -> int:
        if masters in (1, 2):
            raise ValueError("a Redis Cluster needs at least 3 masters (or 0 for none)")
        return masters

    @property
    def redis_cluster_ports(self) -> tuple[int, ...]:
        return tuple(self.redis_cluster_port + i for i in range(self.redis_cluster))

    @property
    def redis_cluster_dir(self) -> Path:
        return self.home / "redis-cluster"

    @property
    def tls_port(self) -> int:
        return self.kafka_tls_port or self.kafka_port + 2

    @property
    def kafka_tls_dir(self) -> Path:
        """The local CA and the broker's certificate (ca.pem is what SASL_SSL clients trust)."""
        return self.kafka_dir / "tls"

    @property
    def kafka_dir(self) -> Path:
        return self.home / "kafka"

    @property
    def redis_dir(self) -> Path:
        return self.home / "redis"

    @property
    def secrets_dir(self) -> Path:
        return self.home / "secrets"
