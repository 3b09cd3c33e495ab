"""A Redis killed with its AOF cut inside a transaction comes back without any of that
transaction, also after the next writes and another kill (deploy/local/redis_aof.py).

A Redis of its own (the local stack's configuration, another port and directory).
"""

from __future__ import annotations

import os
import signal
import time

from deploy.local.redis import LocalRedis
from deploy.local.redis_aof import MANIFEST

KEY = "sr:aof-test:"


def _transaction(server: LocalRedis) -> None:
    """One increment and one push in a MULTI/EXEC, like a script call's effects in the AOF."""
    with server.admin_client() as client:
        pipe = client.pipeline(transaction=True)
        pipe.hincrby(KEY + "h", "n", 1)
        pipe.lpush(KEY + "seq", "x")
        pipe.execute()


def _kill_and_restart(server: LocalRedis, cut_bytes: int = 0) -> None:
    pid = server.state().owned_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    while server.state().running:
        time.sleep(0.05)
    if cut_bytes:
        incr = max((server.dir / MANIFEST).parent.glob("*.incr.aof"), key=lambda p: p.name)
        os.truncate(incr, incr.stat().st_size - cut_bytes)
    server.start()
    server.wait_healthy(30)


def _state(server: LocalRedis) -> tuple[int, int]:
    with server.admin_client() as client:
        return int(client.hget(KEY + "h", "n") or 0), int(client.llen(KEY + "seq"))


def test_a_transaction_cut_in_the_aof_is_dropped_whole_and_stays_dropped(
    own_redis: LocalRedis,
) -> None:
    for _ in range(3):
        _transaction(own_redis)
    time.sleep(1.5)  # past the everysec fsync: the file holds all three
    # The last 10 bytes are inside the third transaction's EXEC: its commands before it are
    # whole, the transaction is not.
    _kill_and_restart(own_redis, cut_bytes=10)
    assert _state(own_redis) == (2, 2)
    _transaction(own_redis)
    time.sleep(1.5)
    _kill_and_restart(own_redis)
    assert _state(own_redis) == (3, 3)
