"""The Lua batch writer against the oracle, applied directly (no Kafka): exact and idempotent."""

from __future__ import annotations

import time

import pytest
import redis

from schemas.events import EventType, InteractionEvent
from streams.feature_worker.batch import KeyTtls, PositionedEvent
from streams.feature_worker.writer import ApplyOutcome, is_transient_reply
from streams.features.keys import FeatureKeys
from streams.features.layout import is_layout_field
from streams.redis.connection import RedisConnection
from tests.feature_oracle import Snapshot
from tests.integration.streams.feature_worker.feature_events import (
    apply_in_batches,
    interleaved,
    oracle_state,
    positioned_events,
)
from tests.integration.streams.feature_worker.feature_state import (
    differences,
    dump_state,
    read_state,
)


def test_batches_leave_exactly_the_oracle_state(
    redis_connection: RedisConnection, redis_admin: redis.Redis
) -> None:
    events = positioned_events(4000, stretch=60.0)
    outcome = apply_in_batches(redis_connection, events)
    expected = oracle_state(redis_connection.key_prefix, events)
    actual = read_state(redis_admin, redis_connection.key_prefix)
    assert differences(actual, expected.snapshot()) == []
    assert outcome == ApplyOutcome(applied=4000, skipped=0)
    assert _outside_the_layout(actual, redis_connection.key_prefix) == []


def _outside_the_layout(state: Snapshot, prefix: str) -> list[str]:
    """Every entity hash field the writer left that streams/features/layout.py does not define."""
    outside = []
    for key, (kind, value) in state.items():
        entity = key.removeprefix(prefix).split(":{", 1)[0]
        if kind != "hash" or "}:" in key:  # bucket hashes: bucket numbers (windows.py)
            continue
        assert isinstance(value, dict)
        entity_kind = "p" if entity == "pop" else entity
        outside += [f"{key} {f}" for f in value if not is_layout_field(entity_kind, f)]
    return outside


def test_another_partition_interleaving_reaches_the_same_state(
    redis_connection: RedisConnection, redis_admin: redis.Redis
) -> None:
    events = positioned_events(3000, seed=5, stretch=60.0)
    other = redis_connection.model_copy(update={"key_prefix": f"{redis_connection.key_prefix}b:"})
    apply_in_batches(redis_connection, events, size=100)
    apply_in_batches(other, interleaved(events, seed=3), size=37)
    first = read_state(redis_admin, redis_connection.key_prefix)
    second = read_state(redis_admin, other.key_prefix)
    first = {k: v for k, v in first.items() if not k.startswith(other.key_prefix)}
    renamed = {
        k.replace(other.key_prefix, redis_connection.key_prefix, 1): v for k, v in second.items()
    }
    assert differences(renamed, first) == []
    assert len(first) > 1000


def test_reapplying_every_batch_changes_nothing_byte_for_byte(
    redis_connection: RedisConnection, redis_admin: redis.Redis
) -> None:
    events = positioned_events(2000, seed=8, stretch=30.0)
    apply_in_batches(redis_connection, events)
    before = dump_state(redis_admin, redis_connection.key_prefix)
    replay = apply_in_batches(redis_connection, interleaved(events, seed=1), size=90)
    assert dump_state(redis_admin, redis_connection.key_prefix) == before
    assert replay == ApplyOutcome(applied=0, skipped=2000)


def test_redelivery_after_a_crash_applies_each_event_once(
    redis_connection: RedisConnection, redis_admin: redis.Redis
) -> None:
    events = positioned_events(3000, seed=9, stretch=20.0)
    # A worker applied up to 2,000, crashed before committing, and the batch re-arrives from
    # the last commit at 1,200: the overlap must be skipped, the rest applied.
    first = apply_in_batches(redis_connection, events[:2000], size=200)
    second = apply_in_batches(redis_connection, events[1200:], size=150)
    expected = oracle_state(redis_connection.key_prefix, events)
    assert (
        differences(read_state(redis_admin, redis_connection.key_prefix), expected.snapshot()) == []
    )
    assert (first.applied, second.applied, second.skipped) == (2000, 1000, 800)


@pytest.mark.alone  # the session's Redis refuses every client's writes meanwhile
def test_a_full_redis_refuses_the_whole_batch_with_a_reply_the_worker_waits_on(
    redis_connection: RedisConnection, redis_admin: redis.Redis
) -> None:
    events = positioned_events(40, seed=12)
    limit = str(redis_admin.config_get("maxmemory")["maxmemory"])
    redis_admin.config_set("maxmemory", 1)  # below what is used: noeviction refuses writes
    try:
        with pytest.raises(redis.ResponseError) as refused:
            apply_in_batches(redis_connection, events)
    finally:
        redis_admin.config_set("maxmemory", limit)
    assert is_transient_reply(refused.value)
    assert read_state(redis_admin, redis_connection.key_prefix) == {}
    assert apply_in_batches(redis_connection, events) == ApplyOutcome(applied=40, skipped=0)


def _ttls(admin: redis.Redis, prefix: str) -> dict[str, int]:
    return {key.decode(): int(admin.ttl(key)) for key in admin.scan_iter(match=f"{prefix}*")}


def test_user_and_session_keys_carry_a_ttl_within_the_bound_and_the_rest_none(
    redis_connection: RedisConnection, redis_admin: redis.Redis
) -> None:
    ttls = KeyTtls(user_s=7200, session_s=900)
    prefix = redis_connection.key_prefix
    events = positioned_events(1500, seed=21, stretch=30.0)
    apply_in_batches(redis_connection, events, ttls=ttls)
    remaining = _ttls(redis_admin, prefix)
    users = {k: t for k, t in remaining.items() if k.startswith(f"{prefix}u:")}
    sessions = {k: t for k, t in remaining.items() if k.startswith(f"{prefix}s:")}
    others = {k: t for k, t in remaining.items() if k not in users and k not in sessions}
    suffixes = {k.rsplit("}", 1)[1] for k in users}
    assert suffixes == {"", ":m", ":h", ":seq"}
    assert {k.rsplit("}", 1)[1] for k in sessions} == {"", ":seq"}
    assert all(0 < t <= ttls.user_s for t in users.values()), sorted(users.values())[:3]
    assert all(0 < t <= ttls.session_s for t in sessions.values())
    # Items, categories and popularity are bounded by their windows and the catalog instead.
    assert others and set(others.values()) == {-1}


def test_a_write_refreshes_the_ttl_so_only_idle_entities_expire(
    redis_connection: RedisConnection, redis_admin: redis.Redis
) -> None:
    ttls = KeyTtls(user_s=3, session_s=3)
    keys = FeatureKeys(redis_connection.key_prefix)
    events = positioned_events(400, seed=22)
    idle = events[0].event
    active = next(p for p in events if p.event.user_id != idle.user_id).event
    later = [p for p in events if p.event.user_id == active.user_id]
    apply_in_batches(redis_connection, events, ttls=ttls)
    time.sleep(2)
    last = later[-1]
    # Applied again under a new offset: the active user writes, the idle one does not.
    again = PositionedEvent(last.partition, last.offset + 10_000, last.event)
    apply_in_batches(redis_connection, [again], ttls=ttls)
    time.sleep(1.5)
    assert redis_admin.exists(keys.user(idle.user_id), keys.session(idle.session_id)) == 0
    assert redis_admin.exists(keys.user_sequence(idle.user_id)) == 0
    assert redis_admin.exists(keys.user(active.user_id), keys.session(last.event.session_id)) == 2
    assert redis_admin.exists(keys.user_sequence(active.user_id)) == 1
    assert redis_admin.exists(keys.item(idle.item_id)) == 1


def _view(user: str, item: str, timestamp: float) -> InteractionEvent:
    return InteractionEvent(
        event_id=f"e-{user}-{timestamp}", user_id=user, session_id=f"{user}-s", item_id=item,
        event_type=EventType.VIEW, timestamp=timestamp,
    )


def test_writes_within_a_hundredth_of_the_ttl_keep_one_expiry_time_for_all_of_a_users_keys(
    redis_connection: RedisConnection, redis_admin: redis.Redis
) -> None:
    keys = FeatureKeys(redis_connection.key_prefix)
    now = time.time()
    first = [PositionedEvent(0, 0, _view("u1", "i1", now - 7200))]
    apply_in_batches(redis_connection, first)
    user, minutes = keys.user("u1"), keys.user("u1") + ":m"
    expires = redis_admin.pexpiretime(user)
    assert expires > 0 and redis_admin.pexpiretime(minutes) == expires
    time.sleep(0.05)
    # Two hours later in event time: the minute window moved past every bucket, so its hash is
    # deleted and created again by this write, which does not re-set the expiry time.
    later = [PositionedEvent(0, 1, _view("u1", "i2", now))]
    assert apply_in_batches(redis_connection, later) == ApplyOutcome(applied=1, skipped=0)
    assert redis_admin.hget(minutes, str(int(now // 60))) == b"1"
    assert redis_admin.hlen(minutes) == 1
    assert redis_admin.pexpiretime(user) == expires
    assert redis_admin.pexpiretime(minutes) == expires
    assert redis_admin.pexpiretime(keys.user_sequence("u1")) == expires


def test_a_write_past_a_hundredth_of_the_ttl_sets_a_later_expiry_time_on_every_key(
    redis_connection: RedisConnection, redis_admin: redis.Redis
) -> None:
    ttls = KeyTtls(user_s=60, session_s=60)
    keys = FeatureKeys(redis_connection.key_prefix)
    now = time.time()
    apply_in_batches(redis_connection, [PositionedEvent(0, 0, _view("u1", "i1", now))], ttls=ttls)
    expires = redis_admin.pexpiretime(keys.user("u1"))
    time.sleep(0.7)  # past 1% of 60 s
    later = [PositionedEvent(0, 1, _view("u1", "i2", now + 1))]
    assert apply_in_batches(redis_connection, later, ttls=ttls) == ApplyOutcome(1, 0)
    user_keys = [keys.user("u1"), keys.user_sequence("u1")] + [
        keys.user("u1") + suffix for suffix in (":m", ":h")
    ]
    session_keys = [keys.session("u1-s"), keys.session_sequence("u1-s")]
    renewed = {redis_admin.pexpiretime(key) for key in user_keys + session_keys}
    assert len(renewed) == 1 and renewed.pop() >= expires + 600


def _month_old_view(user: str) -> InteractionEvent:
    return _view(user, "i1", time.time() - 30 * 86_400)


def test_a_users_lag_is_from_entering_kafka_to_applied_not_the_events_age(
    redis_connection: RedisConnection, redis_admin: redis.Redis
) -> None:
    keys = FeatureKeys(redis_connection.key_prefix)
    backfilled = _month_old_view("backfilled")
    untimed = _month_old_view("untimed")
    just_sent = PositionedEvent(0, 0, backfilled, round(time.time() * 1000))
    apply_in_batches(redis_connection, [just_sent, PositionedEvent(0, 1, untimed)])
    lag_ms = float(redis_admin.hget(keys.user("backfilled"), "lag_ms") or -1)
    assert 0 <= lag_ms < 5_000
    # A record without a Kafka time falls back to its event time: a month.
    untimed_lag_ms = float(redis_admin.hget(keys.user("untimed"), "lag_ms") or -1)
    assert untimed_lag_ms >= 30 * 86_400_000 - 5_000
    # A re-delivery applies nothing, so it leaves the lag it found.
    time.sleep(0.05)
    apply_in_batches(redis_connection, [just_sent])
    assert float(redis_admin.hget(keys.user("backfilled"), "lag_ms") or -1) == lag_ms
