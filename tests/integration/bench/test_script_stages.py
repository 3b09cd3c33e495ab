"""`streamrec bench script` times variants of apply.lua that stop at its stage markers: they
must run on the real Redis and leave the state untouched, so every stage meets the same state."""

from __future__ import annotations

import redis

from bench.script import STAGES, apply_batches, load, positioned, variant
from deploy.generators.sample import SampleConfig, SampleGenerator
from streams.features.keys import FeatureKeys


def _state(admin: redis.Redis, prefix: str) -> dict[bytes, object]:
    state: dict[bytes, object] = {}
    for key in admin.scan_iter(match=f"{prefix}*", count=1000):
        kind = admin.type(key)
        if kind == b"hash":
            state[key] = admin.hgetall(key)
        elif kind == b"list":
            state[key] = admin.lrange(key, 0, -1)
        else:
            state[key] = admin.zrange(key, 0, -1, withscores=True)
    return state


def test_every_stage_but_the_last_runs_and_writes_nothing(
    redis_admin: redis.Redis, redis_prefix: str
) -> None:
    stream = positioned(SampleGenerator(SampleConfig(seed=5)).events(600))
    keys = FeatureKeys(redis_prefix)
    apply_batches(redis_admin, load(redis_admin, variant("written")), keys, stream[:300])
    before = _state(redis_admin, redis_prefix)
    assert before
    for stage in STAGES[:-1]:
        apply_batches(redis_admin, load(redis_admin, variant(stage)), keys, stream[300:])
        assert _state(redis_admin, redis_prefix) == before, stage
    apply_batches(redis_admin, load(redis_admin, variant("written")), keys, stream[300:])
    assert _state(redis_admin, redis_prefix) != before
