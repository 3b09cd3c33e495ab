"""Settings of the feature workers (`streamrec stream`), read from STREAMREC_* variables."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from streams.feature_worker.batch import DEFAULT_SESSION_TTL_S, DEFAULT_USER_TTL_S, KeyTtls
from streams.features.definitions import POPULARITY_BUCKET_S
from streams.kafka.principals import FEATURE_WORKER
from streams.service_settings import ServiceSettings

DEFAULT_BATCH_MAX_EVENTS = 10_000


class StreamSettings(ServiceSettings):
    KAFKA_PRINCIPAL: ClassVar[str | None] = FEATURE_WORKER
    group_id: str = Field(
        "streamrec-features",
        pattern=r"^[a-zA-Z0-9._-]{1,128}$",
        description="Consumer group: every worker of one deployment shares it.",
    )
    instance_id: str | None = Field(
        None,
        pattern=r"^[a-zA-Z0-9._-]{1,128}$",
        description="Static group membership: a worker restarted with the same id gets its "
        "partitions back at once instead of waiting for its old session to expire.",
    )
    batch_max_events: int = Field(
        DEFAULT_BATCH_MAX_EVENTS, ge=1, le=20_000, description="Records per batch: one Kafka "
        "consume, one Redis pipeline, one offset store. At live rates the batch window fills "
        "fewer; a backlog (a restart, a burst) fills it, and the larger the batch the more events "
        "each entity's update folds, so Redis works less per event while the worker catches up.",
    )
    call_events: int = Field(
        100, ge=1, le=20_000, description="Most events per Redis script call (of its entities "
        "together): Redis runs a script atomically, so with `call_entities` this bounds how long "
        "one call blocks other clients (the scorer), at about half a millisecond. Raise both for "
        "a backfill no scorer shares.",
    )
    call_entities: int = Field(
        8, ge=1, le=1000, description="Most entities (their folded updates) per Redis script "
        "call. Each call has a fixed cost (entering the script, unpacking its updates) that "
        "its entities share; the default keeps a call near half a millisecond.",
    )
    in_flight_calls: int = Field(
        8, ge=1, le=100_000, description="Most script calls the worker leaves unanswered on a "
        "single Redis. Redis runs what one client has queued a read (16 KB) at a time, so the "
        "more calls queued, the longer other clients (the scorer's reads) wait behind them; a "
        "few keep Redis busy while the worker writes more. (On a cluster, redis-py's pipeline "
        "sends each master its share at once.)",
    )
    durable_after_s: float = Field(
        3.0, ge=0, le=60, description="A batch's offsets are stored for commit only this long "
        "after Redis acknowledged its writes, and a rewind after a Redis restart returns to the "
        "offsets stored: with `appendfsync everysec`, Redis 7.0 may acknowledge a write while "
        "it postpones writing its AOF buffer behind a slow fsync, for up to two seconds of its "
        "clock (so up to 3 s), and fsyncs at least once a second otherwise. 0 for a Redis with "
        "`appendfsync always` (durable when acknowledged).",
    )
    batch_within_s: float = Field(
        0.02, gt=0, le=10, description="Longest wait to fill a batch while the stream is "
        "quiet (a consume returns when `batch_max_events` records arrived or this passed): it "
        "adds up to this much to the features' age.",
    )
    busy_batch_within_s: float = Field(
        0.05, gt=0, le=10, description="Longest wait to fill a batch after one that arrived at "
        "`busy_events_per_s` or faster. A longer batch folds more events into each entity's "
        "update (categories, popularity shards, popular items), so Redis works less per event "
        "when it is busiest, for that much more feature age.",
    )
    busy_events_per_s: float = Field(
        2000.0, gt=0, description="Arrival rate (events/s, this worker's partitions) from which "
        "the stream counts as busy. Below it a batch holds too few events in common to save "
        "Redis work, and the shorter wait keeps the features fresher.",
    )
    fetch_max_wait_ms: int = Field(
        20, ge=1, le=1500, description="How long the broker may hold a fetch to gather "
        "fetch_min_bytes: fewer, fuller fetches cost less CPU; the added"
        " feature latency is at most this, and only while the stream is slow. (0 would "
        "make an idle consumer fetch in a tight loop.)",
    )
    fetch_min_bytes: int = Field(
        65_536, ge=1, le=16 * 1024 * 1024, description="The broker answers a fetch at once "
        "when this much is ready (fast streams never wait).",
    )
    retry_initial_s: float = Field(
        0.1, gt=0, le=60, description="First back-off after a Redis or Kafka failure."
    )
    retry_max_s: float = Field(
        5.0, gt=0, le=300, description="Back-off cap while a dependency is down."
    )
    session_timeout_s: float = Field(
        10.0, ge=6, le=300, description="Kafka group session timeout (broker minimum is 6 s)."
    )
    user_ttl_s: int = Field(
        DEFAULT_USER_TTL_S, ge=60, le=400 * 86_400, description="A user's feature keys "
        "(`u:{id}`, its buckets and sequence) expire this long after the user's last applied "
        "event (from 99% of it: a write re-sets the expiry once 1% of it has passed), so only "
        "users idle this long are dropped (they come back as new users). Bounds Redis memory by "
        "the users active within it.",
    )
    session_ttl_s: int = Field(
        DEFAULT_SESSION_TTL_S, ge=60, le=400 * 86_400, description="A session's keys "
        "(`s:{id}`, its sequence) expire this long after its last applied event (from 99% of "
        "it, as users'). A session idle that long is over: a request naming it again starts "
        "afresh.",
    )
    popularity_bucket_s: int = Field(
        POPULARITY_BUCKET_S, ge=10, le=86_400, description="Width of the buckets the recent "
        "item popularity is counted in, by event time. The scorer's cold-start list is the "
        "newest bucket plus half of the previous one, so a narrower bucket follows a change in "
        "taste sooner and counts fewer events. Every worker of a deployment must use the same "
        "width.",
    )
    service_name: str = Field("streams", description="Recorded in dead letters.")

    def key_ttls(self) -> KeyTtls:
        return KeyTtls(user_s=self.user_ttl_s, session_s=self.session_ttl_s)
