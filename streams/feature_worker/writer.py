"""Writes a batch of events into Redis in one round trip: one EVALSHA of apply.lua per entity."""

from __future__ import annotations

import hashlib
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol

import redis.asyncio as aioredis
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

from streams.feature_worker.batch import KeyTtls, PositionedEvent, script_header
from streams.feature_worker.fold import EntityUpdate, entity_updates, fold
from streams.features.keys import FeatureKeys
from streams.redis.cluster_scripts import ClusterScripts
from streams.redis.connection import RedisConnection
from streams.redis.resp import Arg
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


class ScriptPipeline(Protocol):
    """What the writer needs from a Redis client: commands sent together, given in slices the
    client may write as they come, every reply back (an error reply as its exception value) in
    order."""

    async def pipeline(self, slices: Iterable[Sequence[Sequence[Arg]]]) -> list[Any]: ...

    async def execute(self, *command: Arg) -> Any: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class ApplyOutcome:
    applied: int
    skipped: int
    """Events their user had already applied (re-deliveries and replays)."""


DEFAULT_CALL_EVENTS = 100
SLICE_CALLS = 128
"""Calls folded and written at a time: small enough that Redis starts early, large enough that
the writes stay few."""
MERGED, SKIPPED, REFUSED = 0, 1, 2
"""apply.lua's replies: merged; every event already applied; some were (nothing written)."""


class FeatureWriter:
    """Applies batches through the `streams` ACL user; idempotent per (partition, offset).

    A batch becomes one script call per entity (its events folded in Python, order kept, see
    fold.py), all sent in one pipeline: one round trip per batch, each call one hash slot and
    at most `call_events` events, so no call holds Redis (and the scorer's reads) for long."""

    def __init__(
        self,
        client: ScriptPipeline,
        key_prefix: str,
        ttls: KeyTtls = KeyTtls(),
        call_events: int = DEFAULT_CALL_EVENTS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._clock = clock
        """Wall clock (s) sent with each call: the applied time of the users' `lag_ms`."""
        self._keys = FeatureKeys(key_prefix)
        self._header = script_header(ttls)
        self._call_events = call_events

    @staticmethod
    def connect(connection: RedisConnection) -> ScriptPipeline:
        """A lean asyncio connection with the connection's user and timeout (never blocks the
        loop; see streams/redis/script_connection.py), or on a cluster redis-py's cluster
        pipeline, which routes each call to its slot's master."""
        if connection.cluster:
            client = connection.async_client()
            assert isinstance(client, aioredis.RedisCluster)
            return ClusterScripts(client)
        return ScriptConnection(connection)

    async def apply(self, batch: Sequence[PositionedEvent]) -> ApplyOutcome:
        if not batch:
            return ApplyOutcome(0, 0)
        updates, replies = await self._send(entity_updates(self._keys, batch, self._call_events))
        refused = [u for u, reply in zip(updates, replies, strict=True) if reply == REFUSED]
        if refused:
            # Some of these entities' events were applied before (a crash between batches cut
            # differently): one update per event, in order, each applied or skipped whole.
            logger.info("re-sending partly applied entities entities=%d", len(refused))
            single, again = await self._send(
                fold(u.kind, u.key, [item]) for u in refused for item in u.events
            )
            updates += single
            replies += again
        applied = skipped = 0
        for update, reply in zip(updates, replies, strict=True):
            if update.kind != "u" or reply == REFUSED:
                continue
            if reply == MERGED:
                applied += len(update.events)
            else:
                skipped += len(update.events)
        return ApplyOutcome(applied, skipped)

    async def _send(self, updates: Iterable[EntityUpdate]) -> tuple[list[EntityUpdate], list[int]]:
        """The updates sent, in order, and each one's reply (MERGED, SKIPPED or REFUSED): one
        pipeline, written in slices of `SLICE_CALLS` calls as they are folded, so Redis merges
        the first slice while the worker folds the next."""
        sent_ms = str(round(self._clock() * 1000))
        sent: list[EntityUpdate] = []
        commands: list[tuple[Arg, ...]] = []

        def slices() -> Iterator[list[tuple[Arg, ...]]]:
            pending = iter(updates)
            while piece := list(itertools.islice(pending, SLICE_CALLS)):
                sent.extend(piece)
                part: list[tuple[Arg, ...]] = [
                    ("EVALSHA", SCRIPT_SHA, 1, u.key, *self._header, u.kind, sent_ms, *u.args)
                    for u in piece
                ]
                commands.extend(part)
                yield part

        replies = await self._client.pipeline(slices())
        missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if missing:
            # A restarted or failed-over Redis has an empty script cache: load, send those again
            # (in their order, so an entity's calls still apply in stream order).
            logger.info("loading feature script sha=%s", SCRIPT_SHA)
            await self._client.execute("SCRIPT", "LOAD", SCRIPT)
            again = await self._client.pipeline([[commands[i] for i in missing]])
            for i, reply in zip(missing, again, strict=True):
                replies[i] = reply
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return sent, [int(reply) for reply in replies]

    async def close(self) -> None:
        await self._client.aclose()
