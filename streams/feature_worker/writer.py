"""Writes a batch of events into Redis in one round trip: FCALLs of the function apply.lua
defines, each merging the folded updates of several entities."""

from __future__ import annotations

import hashlib
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import (
    ClusterDownError,
    MasterDownError,
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
    ResponseError,
    TryAgainError,
)

from streams.feature_worker.batch import KeyTtls, PositionedEvent, script_header
from streams.feature_worker.fold import EntityUpdate, entity_updates, fold
from streams.features.definitions import POPULARITY_BUCKET_S
from streams.features.keys import FeatureKeys
from streams.redis.cluster_scripts import ClusterScripts
from streams.redis.connection import RedisConnection
from streams.redis.resp import Arg
from streams.redis.script_connection import DEFAULT_IN_FLIGHT, OnConnect, ScriptConnection

logger = logging.getLogger(__name__)

SOURCE = resources.files("streams.feature_worker").joinpath("apply.lua").read_text()


@dataclass(frozen=True)
class FeatureFunction:
    """apply.lua as a Redis Functions library of its own version: the library and its function
    are named after the source's digest, so workers of two releases (a rolling deployment) each
    call their own, and a library, once loaded, is never replaced under a running worker.

    A library's helpers are defined once, when Redis loads it; a script (EVALSHA) re-ran all of
    that on every call. Redis keeps loaded libraries in its RDB and AOF (and replicates them), so
    a restarted Redis has them; where one has not (a flushed or new master), the call answers
    "Function not found" and the writer loads the library and sends those calls again."""

    code: str
    name: str

    @classmethod
    def of(cls, source: str) -> FeatureFunction:
        version = hashlib.sha1(source.encode()).hexdigest()[:16]
        code = source.replace("name=streamrec_features", f"name=streamrec_features_{version}", 1)
        name = f"streamrec_apply_{version}"
        code = code.replace("register_function('streamrec_apply'", f"register_function('{name}'")
        assert name in code and f"streamrec_features_{version}" in code
        return cls(code, name)


FUNCTION = FeatureFunction.of(SOURCE)

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


def is_missing_function(reply: object) -> bool:
    """Whether a call's reply says Redis lacks the library (new, flushed or restarted empty)."""
    return isinstance(reply, ResponseError) and "Function not found" in str(reply)


def is_transient_reply(error: ResponseError) -> bool:
    return isinstance(error, _TRANSIENT_ERRORS) or str(error).startswith(_TRANSIENT_CODES)


class ScriptPipeline(Protocol):
    """What the writer needs from a Redis client: commands sent together, given in slices the
    client may write as they come, every reply back (an error reply as its exception value) in
    order; and which keys one script call may name together (those of one `slot`)."""

    def slot(self, key: str) -> int: ...

    async def pipeline(self, slices: Iterable[Sequence[Sequence[Arg]]]) -> list[Any]: ...

    async def execute(self, *command: Arg) -> Any: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class ApplyOutcome:
    applied: int
    skipped: int
    """Events their user had already applied (re-deliveries and replays)."""


DEFAULT_CALL_EVENTS = 100
DEFAULT_CALL_ENTITIES = 8
SLICE_UPDATES = 512
"""Entity updates folded and written at a time: small enough that Redis starts early, large
enough that the writes stay few and the calls full."""
MERGED, SKIPPED, REFUSED = 0, 1, 2
"""apply.lua's replies: merged; every event already applied; some were (nothing written)."""


class FeatureWriter:
    """Applies batches through the `streams` ACL user; idempotent per (partition, offset).

    A batch becomes one update per entity (its events folded in Python, order kept, see
    fold.py), packed into script calls of at most `call_entities` updates and `call_events`
    events in all, each call's entities in one hash slot, all sent in one pipeline with a few
    calls unanswered at a time: neither one call nor the calls queued behind it hold Redis
    (and the scorer's reads) for long."""

    def __init__(
        self,
        client: ScriptPipeline,
        key_prefix: str,
        ttls: KeyTtls = KeyTtls(),
        call_events: int = DEFAULT_CALL_EVENTS,
        clock: Callable[[], float] = time.time,
        call_entities: int = DEFAULT_CALL_ENTITIES,
        popularity_bucket_s: int = POPULARITY_BUCKET_S,
        function: FeatureFunction = FUNCTION,
    ) -> None:
        self._client = client
        self._function = function
        self._clock = clock
        """Wall clock (s) sent with each call: the applied time of the users' `lag_ms`."""
        self._keys = FeatureKeys(key_prefix)
        self._header = script_header(ttls)
        self._call_events = call_events
        self._call_entities = call_entities
        self._popularity_bucket_s = popularity_bucket_s

    @staticmethod
    def connect(
        connection: RedisConnection,
        in_flight: int = DEFAULT_IN_FLIGHT,
        on_connect: OnConnect | None = None,
    ) -> ScriptPipeline:
        """A lean asyncio connection with the connection's user and timeout (never blocks the
        loop; see streams/redis/script_connection.py) that leaves at most `in_flight` calls
        unanswered and runs `on_connect` on each connection it opens, or on a cluster redis-py's
        cluster pipeline, which routes each call to its slot's master."""
        if connection.cluster:
            client = connection.async_client()
            assert isinstance(client, aioredis.RedisCluster)
            return ClusterScripts(client)
        return ScriptConnection(connection, in_flight, on_connect)

    async def apply(self, batch: Sequence[PositionedEvent]) -> ApplyOutcome:
        if not batch:
            return ApplyOutcome(0, 0)
        updates, replies = await self._send(entity_updates(
            self._keys, batch, self._call_events, self._popularity_bucket_s
        ))
        refused = [u for u, reply in zip(updates, replies, strict=True) if reply == REFUSED]
        if refused:
            # Some of these entities' events were applied before (a crash between batches cut
            # differently): one update per event, in order, each applied or skipped whole.
            logger.info("re-sending partly applied entities entities=%d", len(refused))
            single, again = await self._send(
                fold(u.kind, u.key, [item], popularity_bucket_s=self._popularity_bucket_s)
                for u in refused for item in u.events
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
        """The updates sent, in the order sent, and each one's reply (MERGED, SKIPPED or
        REFUSED): one pipeline, written in slices of `SLICE_UPDATES` updates as they are folded,
        so Redis merges the first slice while the worker folds the next."""
        header = (*self._header, str(round(self._clock() * 1000)))
        calls: list[list[EntityUpdate]] = []
        commands: list[tuple[Arg, ...]] = []

        def slices() -> Iterator[list[tuple[Arg, ...]]]:
            pending = iter(updates)
            while piece := list(itertools.islice(pending, SLICE_UPDATES)):
                packed = pack_calls(
                    piece, self._client.slot, self._call_events, self._call_entities
                )
                part = [function_call(self._function.name, header, call) for call in packed]
                calls.extend(packed)
                commands.extend(part)
                yield part

        replies = await self._client.pipeline(slices())
        missing = [i for i, reply in enumerate(replies) if is_missing_function(reply)]
        if missing:
            # A Redis without the library (new, flushed, or restarted without its data): load
            # it, send those calls again (in their order, so an entity's calls still apply in
            # stream order). Another worker may have loaded it meanwhile: that is fine.
            logger.info("loading feature function name=%s", self._function.name)
            await self._load()
            again = await self._client.pipeline([[commands[i] for i in missing]])
            for i, reply in zip(missing, again, strict=True):
                replies[i] = reply
        sent: list[EntityUpdate] = []
        codes: list[int] = []
        for call, reply in zip(calls, replies, strict=True):
            if isinstance(reply, Exception):
                raise reply
            sent += call
            codes += (int(code) for code in reply)
        return sent, codes

    async def _load(self) -> None:
        # REPLACE: a master that has it already (on a cluster, the load goes to every master)
        # reloads the same code under the same name.
        await self._client.execute("FUNCTION", "LOAD", "REPLACE", self._function.code)

    async def close(self) -> None:
        await self._client.aclose()


def pack_calls(
    updates: Sequence[EntityUpdate],
    slot: Callable[[str], int],
    call_events: int,
    call_entities: int = DEFAULT_CALL_ENTITIES,
) -> list[list[EntityUpdate]]:
    """The updates as script calls: each call's keys in one slot, at most `call_entities`
    updates and `call_events` events in all (an update is never larger: fold.py cuts entities
    into pieces of that size). Updates keep their order within a slot, so an entity's pieces
    still apply in stream order."""
    by_slot: dict[int, list[list[EntityUpdate]]] = {}
    events: dict[int, int] = {}
    for update in updates:
        key_slot, n = slot(update.key), len(update.events)
        calls = by_slot.get(key_slot)
        if (
            calls is None
            or events[key_slot] + n > call_events
            or len(calls[-1]) >= call_entities
        ):
            by_slot.setdefault(key_slot, []).append([update])
            events[key_slot] = n
        else:
            calls[-1].append(update)
            events[key_slot] += n
    return [call for calls in by_slot.values() for call in calls]


def function_call(
    name: str, header: Sequence[str], call: Sequence[EntityUpdate]
) -> tuple[Arg, ...]:
    """The FCALL merging `call` (apply.lua's keys and args); `header` ends with the clock."""
    updates = [(u.kind, *u.values) for u in call]
    return ("FCALL", name, len(call), *(u.key for u in call), *header, _pack(updates))


_pack = msgspec.msgpack.Encoder().encode
"""MessagePack of an update list: msgspec writes the bytes msgpack-python's `packb` writes (the
smallest form of each number, str for text, arrays for tuples and lists) at about half its
cost."""
