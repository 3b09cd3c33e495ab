"""Writes a batch of events into Redis in one round trip: one EVALSHA of apply.lua per batch."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol

from redis.exceptions import (
    ClusterDownError,
    MasterDownError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    ResponseError,
    TryAgainError,
)

from streams.feature_worker.batch import KeyTtls, PositionedEvent, script_args
from streams.redis.connection import RedisConnection
from streams.redis.script_connection import ScriptConnection

logger = logging.getLogger(__name__)

SCRIPT = resources.files("streams.feature_worker").joinpath("apply.lua").read_text()
SCRIPT_SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()

# Server replies that say "not now" rather than "this batch is bad": retry them with backoff.
# Both clients raise redis-py's class per error code, the code stripped from the message (an OOM
# reply arrives as OutOfMemoryError("command not allowed ...")), so those are matched by class;
# BUSY (another script runs) and MISCONF (Redis cannot persist: disk full, a failed save or AOF
# write, and `stop-writes-on-bgsave-error`) have no class and keep their code. LOADING arrives as
# BusyLoadingError, a ConnectionError, and is retried as such. NOPERM is the ACL's answer, never
# the event's (every key the script builds is under the worker's own prefix): wait for the fix.
_TRANSIENT_ERRORS = (
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
    TryAgainError,
    MasterDownError,
    ClusterDownError,
)


_TRANSIENT_CODES = ("BUSY", "MISCONF")
"""Codes of transient replies redis-py has no class for (the message starts with the code)."""


def is_transient_reply(error: ResponseError) -> bool:
    return isinstance(error, _TRANSIENT_ERRORS) or str(error).startswith(_TRANSIENT_CODES)


class ScriptRunner(Protocol):
    """What the writer needs from a Redis client (redis-py's asyncio client has it too)."""

    async def evalsha(self, sha: str, numkeys: int, *args: Any) -> Any: ...

    async def script_load(self, script: str) -> Any: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class ApplyOutcome:
    applied: int
    skipped: int
    """Events their user had already applied (re-deliveries and replays)."""


class FeatureWriter:
    """Applies batches through the `streams` ACL user; idempotent per (partition, offset)."""

    def __init__(self, client: ScriptRunner, key_prefix: str, ttls: KeyTtls = KeyTtls()) -> None:
        self._client = client
        self._prefix = key_prefix
        self._ttls = ttls

    @staticmethod
    def connect(connection: RedisConnection) -> ScriptConnection:
        """A lean asyncio connection with the connection's user and timeout (never blocks the
        loop; see streams/redis/script_connection.py)."""
        return ScriptConnection(connection)

    async def apply(self, batch: Sequence[PositionedEvent]) -> ApplyOutcome:
        if not batch:
            return ApplyOutcome(0, 0)
        args = script_args(self._prefix, self._ttls, batch)
        try:
            reply = await self._client.evalsha(SCRIPT_SHA, 0, *args)
        except NoScriptError:
            # A restarted or failed-over Redis has an empty script cache: load and run again.
            logger.info("loading feature script sha=%s", SCRIPT_SHA)
            await self._client.script_load(SCRIPT)
            reply = await self._client.evalsha(SCRIPT_SHA, 0, *args)
        applied, skipped = reply
        return ApplyOutcome(int(applied), int(skipped))

    async def close(self) -> None:
        await self._client.aclose()
