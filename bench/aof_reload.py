"""`streamrec bench aof-reload`: how long Redis takes to come back from its AOF, at the size the
local stack's rewrite threshold lets it reach.

A Redis of its own (the local stack's configuration: AOF everysec, RDB preamble, rewrite past
512 MB) is filled through the feature script with generated events until its incremental AOF
holds `aof_mb` (just under the threshold: the most a restart replays while the base stays
smaller), then killed (SIGKILL) and restarted: the time until it answers PING is the reload.
Then `BGREWRITEAOF` folds it into the RDB base and the same restart measures a reload of the
base alone. Both bound what `streamrec up` waits for (`start_timeout_s`).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from bench.report import print_table, write_result
from deploy.generators.sample import SampleConfig, SampleGenerator
from deploy.local.redis import LocalRedis
from deploy.local.settings import LocalStackSettings
from deploy.local.worker_process import free_port
from streams.feature_worker.batch import PositionedEvent
from streams.feature_worker.writer import FeatureWriter
from streams.redis.connection import RedisConnection

BATCH = 5_000
MAX_EVENTS = 2_000_000
"""Enough for the default size (~1.2 KB of AOF per event); event times stay within a year."""


def run(json_path: Path, aof_mb: int, users: int, items: int) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="bench-aof-"))
    server = LocalRedis(LocalStackSettings(home=home, redis_port=free_port()))
    server.start()
    try:
        server.wait_healthy(60)
        events = asyncio.run(_fill(server, aof_mb * 2**20, users, items))
        incr_mb = _aof_mb(server, "*.incr.aof")
        base_mb = _aof_mb(server, "*.base.rdb")
        replay_s = _restart(server)
        replay_loaded_s = _loaded_s(server)
        keys = server.admin_client().dbsize()
        _rewrite(server.admin_client())
        rewritten_mb = _aof_mb(server, "*.base.rdb")
        base_s = _restart(server)
        base_loaded_s = _loaded_s(server)
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)
    result = {
        "events": events,
        "keys": keys,
        "incr_aof_mb": round(incr_mb, 1),
        "base_rdb_mb_before": round(base_mb, 1),
        "reload_s": round(replay_s, 2),
        "reload_redis_log_s": replay_loaded_s,
        "replay_mb_per_s": round(incr_mb / replay_s, 1),
        "rewritten_base_rdb_mb": round(rewritten_mb, 1),
        "reload_after_rewrite_s": round(base_s, 2),
        "reload_after_rewrite_redis_log_s": base_loaded_s,
    }
    write_result(json_path, result)
    print_table("bench aof-reload (SIGKILL, restart, until PING answers)", [
        ("events written", f"{events:,}"),
        ("keys", f"{keys:,}"),
        ("incremental AOF", f"{incr_mb:.0f} MB (base {base_mb:.1f} MB)"),
        ("reload", f"{replay_s:.1f} s ({incr_mb / replay_s:.0f} MB/s; {replay_loaded_s} s "
                   "loading in Redis's log)"),
        ("after a rewrite: RDB base", f"{rewritten_mb:.0f} MB, reload {base_s:.1f} s"),
    ])
    return result


async def _fill(server: LocalRedis, target_bytes: int, users: int, items: int) -> int:
    s = server.s
    connection = RedisConnection(host=s.host, port=s.redis_port, username="streams",
                                 secrets_dir=s.secrets_dir, key_prefix="sr:bench:aof:")
    writer = FeatureWriter(FeatureWriter.connect(connection), connection.key_prefix)
    stream = SampleGenerator(SampleConfig(users=users, items=items, seed=5)).events(MAX_EVENTS)
    offset = 0
    try:
        while _aof_bytes(server, "*.incr.aof") < target_bytes:
            batch = [PositionedEvent(0, offset + n, event)
                     for n, event in enumerate(itertools.islice(stream, BATCH))]
            await writer.apply(batch)
            offset += len(batch)
    finally:
        await writer.close()
    return offset


def _aof_bytes(server: LocalRedis, pattern: str) -> int:
    return sum(p.stat().st_size for p in (server.dir / "appendonlydir").glob(pattern))


def _aof_mb(server: LocalRedis, pattern: str) -> float:
    return _aof_bytes(server, pattern) / 2**20


def _restart(server: LocalRedis) -> float:
    """SIGKILL, restart, seconds until PING answers (LOADING until then)."""
    pid = server.state().owned_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    while server.state().running:
        time.sleep(0.01)
    started = time.monotonic()
    server.start()
    server.wait_healthy(600)
    return time.monotonic() - started


def _loaded_s(server: LocalRedis) -> float:
    """The last load time Redis logged ("DB loaded from append only file: N seconds")."""
    lines = server.log_file.read_text(errors="replace").splitlines()
    loaded = [line for line in lines if "DB loaded from append only file" in line]
    return float(loaded[-1].rsplit(":", 1)[1].split()[0])


def _rewrite(admin: redis.Redis) -> None:
    admin.bgrewriteaof()
    time.sleep(0.5)
    while True:
        info = admin.info("persistence")
        if not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled"):
            return
        time.sleep(0.2)
