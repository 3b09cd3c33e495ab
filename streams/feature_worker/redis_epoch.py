"""Which Redis process the worker writes to: a new one means a rewind.

Redis acknowledges a write once it is in its AOF buffer; with `appendfsync everysec` Redis 7.0
may even answer before the buffer is written to the file (it postpones that write up to two
seconds of its clock while an fsync is still running). A Redis that is killed and restarted from
its AOF can therefore come back without writes it acknowledged, and the applied-offset markers
of those writes are gone with them; a worker that carried on from its in-memory position would
never apply those events again.

So every connection the worker opens first asks the server for its `run_id` (a random id each
Redis process draws at start; `INFO server` answers it while the AOF is still loading, too). The
first one is remembered; another one means the worker now talks to a new process, and it raises
`RedisRestarted` before anything is written on that connection. The worker then rewinds every
partition it holds to its last durable position (the offsets it stored for commit, past the
durability horizon) and applies from there: the entities' applied offsets make the events that
did survive skip, and the ones that were lost apply again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from streams.redis.resp import Arg

logger = logging.getLogger(__name__)

Execute = Callable[..., Awaitable[Any]]
"""Sends one command on the connection being opened and returns its reply."""


class RedisRestarted(Exception):
    """The connection just opened reaches another Redis process than the one written to
    before: what that one acknowledged may be lost. Nothing was written on the new connection."""


class RedisEpoch:
    """Remembers the run id of the Redis this worker writes to (`check` on every connection)."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.restarts = 0

    async def check(self, execute: Execute) -> None:
        run_id = parse_run_id(await execute(*_INFO_SERVER))
        if self.run_id is None:
            self.run_id = run_id
            return
        if run_id == self.run_id:
            return
        previous, self.run_id = self.run_id, run_id
        self.restarts += 1
        logger.warning("redis restarted run_id=%s previous=%s", run_id[:12], previous[:12])
        raise RedisRestarted(f"redis run id {run_id[:12]} replaced {previous[:12]}")


_INFO_SERVER: tuple[Arg, ...] = ("INFO", "server")


def parse_run_id(info: bytes | str) -> str:
    """`run_id` of an `INFO server` reply (ValueError when the reply has none)."""
    text = info.decode() if isinstance(info, bytes) else info
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == "run_id" and value.strip():
            return value.strip()
    raise ValueError("INFO server reply without a run_id")
