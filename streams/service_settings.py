"""The base every service's settings object derives from: one env prefix, frozen, strict.

A service builds its settings once at start (`XSettings()` reads `STREAMREC_*` variables, nested
fields with `__`, e.g. `STREAMREC_KAFKA__BOOTSTRAP_SERVERS`) and passes the object down. Each
service logs in to Kafka as its own principal (`KAFKA_PRINCIPAL`) and to Redis as its own ACL user
(`REDIS_USER`) unless the settings name others, even when other connection variables are set.

How the `STREAMREC_` names are laid out: `STREAMREC_LOCAL__<field>` belongs to the local stack
(deploy/local/settings.py), `STREAMREC_DEMO__<field>` to the demo (deploy/demo/settings.py), and
every other `STREAMREC_<name>` to the services, which share that namespace so that one
environment can configure them all (a name means the same to every service that has it). Each
reader refuses the names of its own namespace that nobody there knows: a service, every
`STREAMREC_<name>` whose `<name>` (or, for a nested one, its part before the first `__`) is in
no service's settings (`SERVICE_VARIABLES`), so a misspelling such as `STREAMREC_MODEL_STOR` is
an error at start, while the trainer's `STREAMREC_STORE_DIR` set for all does not stop the
scorer. A misspelt nested field of another service's setting is that service's error (its
nested model forbids extra fields).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.limits import DEFAULT_MAX_FUTURE_SKEW_S
from streams.kafka.connection import KafkaConnection
from streams.redis.connection import RedisConnection

logger = logging.getLogger(__name__)

PREFIX = "STREAMREC_"
OWN_NAMESPACES = ("STREAMREC_LOCAL__", "STREAMREC_DEMO__")
"""Prefixes of the readers that are not services (the local stack, the demo)."""
PROCESS_VARIABLES = ("log_level", "retrain_master_port")
"""Read by a process outside its settings: the log level, the retrain launcher's port range."""
SERVICE_VARIABLES: frozenset[str] = frozenset((
    *PROCESS_VARIABLES,
    "alert_max_age_s", "alerts_group_id", "allowed_lateness_s", "archive_dir", "archive_workers",
    "attribution_window_s", "batch_fill_min_expected", "batch_fill_ms", "batch_max_events",
    "batch_size", "batch_timeout_s", "batch_within_s", "busy_batch_within_s",
    "busy_events_per_s", "call_entities", "call_events", "canary", "candidates",
    "catalog_catch_up_s", "checkpoint_every_batches", "commit_interval_ms", "commit_interval_s",
    "config_refresh_s",
    "context_events", "cpu_nice", "drift", "durable_after_s", "encoder_cpu_runtime", "experiment",
    "fetch_max_wait_ms", "fetch_min_bytes", "full_publish_share", "gate_margin", "gate_metric",
    "gate_min_events", "gate_window_events", "group_id", "history_length",
    "idle_advance_s", "in_flight_calls", "instance_id", "item_max_rows", "item_min_count",
    "item_state_reads_per_s", "item_state_refresh_ms", "k", "kafka", "logged_candidates",
    "max_future_skew_s", "max_pending_responses", "max_users", "metrics_host", "metrics_port",
    "model",
    "model_catch_up_s", "model_name", "model_store", "new_item_slots", "online_item_lr",
    "online_lr", "poll_timeout_s", "popularity_bucket_s", "popularity_candidates",
    "psi_reference_path", "publish_every_s", "publish_stage", "ranker_enabled",
    "ranker_arm", "ranker_gate_every", "ranker_group_id", "ranker_held_back",
    "ranker_held_back_every", "ranker_min_gain",
    "ranker_min_lists", "ranker_name", "redis", "redis_read_spin_us", "requests_offset_reset",
    "retention_days", "retrain_budget_s", "retrain_gate", "retrain_min_after_change_s",
    "retrain_mode", "retrain_retry_s", "retrain_window_s", "retrieval", "retry_initial_s",
    "retry_max_s",
    "rules", "run_timeout_s", "scored_share", "service_name", "session_timeout_s", "session_ttl_s",
    "start_from", "state_dir", "steps_per_batch", "store_dir", "threads", "torch_threads",
    "train_context_events", "user_ttl_s", "window_s",
))
"""The services' namespace: every field of every service's settings class, and the process
variables. A unit test holds it equal to the classes' fields: a new setting is added here too,
or the other services would refuse it when one environment configures them all."""


def unknown_variables(
    prefix: str,
    known: Iterable[str],
    nested: bool,
    exclude: tuple[str, ...] = (),
    environ: Mapping[str, str] = os.environ,
) -> list[str]:
    """The variables named `prefix<name>` (names compared without case, as the settings read
    them) whose name, or with `nested` its part before the first `__`, is not `known`; those
    starting with one of `exclude` belong to another reader."""
    names = {name.lower() for name in known}
    unknown = []
    for variable in environ:
        upper = variable.upper()
        if not upper.startswith(prefix) or upper.startswith(exclude):
            continue
        name = upper[len(prefix):].lower()
        if (name.split("__", 1)[0] if nested else name) not in names:
            unknown.append(variable)
    return sorted(unknown)


def refuse_unknown(unknown: list[str], reader: str) -> None:
    """The error a reader raises for `unknown` variables (their names, never their values)."""
    if unknown:
        raise ValueError(
            f"unknown {reader} variables: {', '.join(unknown)} (no setting has these names; "
            "docs/operations.md, Configuration)"
        )


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="STREAMREC_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        # Errors name the fields, never their values (passwords come in through here too).
        hide_input_in_errors=True,
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
    def _no_unknown_variables(cls, data: Any) -> Any:
        known = SERVICE_VARIABLES | set(cls.model_fields)
        refuse_unknown(unknown_variables(PREFIX, known, True, OWN_NAMESPACES), "service")
        return data

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
