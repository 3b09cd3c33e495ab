"""What the scorer reads from Redis: one pipelined round trip per micro-batch.

Per request: the user's and the session's recent events and counters. Every refresh interval:
the unavailable items, the operator's rules and experiment, and the recent-popularity list, which
the scorer re-reads on a thread of its own (`refresh`: merging thousands of popularity entries
would stall the request thread) and other readers with the batch that finds them stale. Item
categories, needed only by category filters and rules, come from a process cache filled in one
extra round trip for items it has not seen. The ranking stage's item state (first and last
interaction time, event count) is read per item by `item_states`, which the scorer's in-memory
table (serving/item_state_table.py) calls off the request path.

Keys follow streams/features/keys.py (written by the feature worker); the serving configuration
lives under `<prefix>cfg:{serving}:...` and is written by operators, never by the scorer (its
ACL user is read-only).

Redis Cluster: every command reads one key (its first argument) and the round trip is a
non-transactional pipeline, so on a cluster it splits per master with no cross-slot command (the
keys of a request's user, of its session and of the serving configuration may each live on
another master; serving/feature_reads.py).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, TypeVar

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel

from schemas.recommendations import RecommendationRequest
from serving.experiment import Experiment
from serving.rules import BusinessRules
from streams.features import layout
from streams.features.definitions import POPULARITY_SHARDS
from streams.features.keys import FeatureKeys
from streams.redis.connection import SyncClient
from streams.redis.resp import Arg

logger = logging.getLogger(__name__)
D = TypeVar("D", bound=BaseModel)

USER_FIELDS = (layout.LAST_TS, layout.LAG_MS, *layout.COUNTER_FIELDS)
COUNTER_FIELDS = layout.COUNTER_FIELDS
SESSION_FIELDS = (layout.LAST_TS, layout.SESSION_EVENTS)
ITEM_STATE_FIELDS = (layout.FIRST_TS, layout.LAST_TS, *COUNTER_FIELDS)
"""An item hash's first and last interaction time and its counter per event type."""
MAX_CACHED_CATEGORIES = 2_000_000
"""Bounded memory: past this many items the category cache starts over (and refills)."""
CONFIG_REPLIES = 3
"""The unavailable set, the rules document, the experiment document."""
PREVIOUS_BUCKET_WEIGHT = 0.5
"""Recent popularity = the newest bucket's counts + half of the previous bucket's (a smooth
hand-over); the feature workers' `popularity_bucket_s` sets the bucket width."""


class Interaction(NamedTuple):
    """One event of a sequence. A named tuple, not a frozen dataclass: a request parses up to
    a hundred of them, and building a frozen dataclass costs about twice as much."""

    item_id: str
    ts: float
    kind: str


@dataclass(frozen=True)
class UserContext:
    user_id: str
    session_id: str | None
    user_events: tuple[Interaction, ...] = ()
    """Oldest first; the user sequence spans sessions, so it contains the current session."""
    session_events: tuple[Interaction, ...] = ()
    counters: dict[str, float] = field(default_factory=dict)
    last_event_ts: float | None = None
    feature_lag_ms: float | None = None
    """How long the pipeline took to bring the user's newest applied event into Redis (Kafka
    record time to applied, the user hash's `lag_ms`); None when the user has none."""

    @property
    def history(self) -> tuple[Interaction, ...]:
        """What the session model encodes: the user sequence, else the session's own."""
        return self.user_events or self.session_events

    def seen(self) -> set[str]:
        return {e.item_id for e in self.user_events} | {e.item_id for e in self.session_events}


@dataclass(frozen=True)
class ServingConfig:
    unavailable: frozenset[str]
    rules: BusinessRules | None
    """None when Redis holds no rules document (the static configuration applies)."""
    experiment: Experiment | None = None
    """None when Redis holds no experiment document (the static configuration applies)."""


@dataclass(frozen=True)
class BatchFeatures:
    contexts: list[UserContext]
    config: ServingConfig
    popular: list[tuple[str, float]]
    """Most popular items recently, best first (cold-start answers)."""


class RoundTrip(Protocol):
    """The lean pipelined read (serving/feature_reads.py): replies in the commands' order,
    RESP2 shapes, redis-py's exception for the first error reply."""

    def execute(self, commands: Sequence[Sequence[Arg]]) -> list[Any]: ...


StateArrays = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]
"""What the stream knows of items now (their hashes `i:{id}`), in their order: first and last
interaction times (NaN: no interaction yet) and event counts of every type."""


class FeatureReader(Protocol):
    def read(self, requests: Sequence[RecommendationRequest]) -> BatchFeatures: ...

    def categories(self, item_ids: Sequence[str]) -> dict[str, str]: ...

    def item_states(self, item_ids: Sequence[str]) -> StateArrays: ...

    @property
    def config(self) -> ServingConfig:
        """The serving configuration read last."""
        ...


def _text(raw: Any) -> str | None:
    return raw.decode() if isinstance(raw, bytes) else raw


def _number(raw: Any) -> float | None:
    text = _text(raw)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_sequence(entries: Sequence[bytes]) -> tuple[Interaction, ...]:
    """Redis list entries `item ts type`, newest first (LPUSH) -> oldest first."""
    events = []
    for entry in reversed(entries):
        parts = entry.decode().split(" ")
        if len(parts) == 3:  # what the feature script writes
            events.append(Interaction(parts[0], float(parts[1]), parts[2]))
            continue
        ts = float(parts[1]) if len(parts) > 1 else 0.0
        events.append(Interaction(parts[0], ts, "view"))
    return tuple(events)


def parse_document(model: type[D], raw: bytes | None) -> D | None:
    """An operator's JSON document (rules, experiment), None when absent or invalid."""
    if raw is None:
        return None
    try:
        return model.model_validate(json.loads(raw))
    except ValueError as error:
        # A bad document must not stop serving: keep the static configuration and say so.
        logger.error("ignoring invalid document kind=%s error=%s", model.__name__,
                     type(error).__name__)
        return None


class ServingKeys:
    def __init__(self, prefix: str) -> None:
        self.unavailable = f"{prefix}cfg:{{serving}}:unavailable"
        self.rules = f"{prefix}cfg:{{serving}}:rules"
        self.experiment = f"{prefix}cfg:{{serving}}:experiment"


class RedisFeatureReader:
    """Reads with the scorer's read-only ACL user; see the module docstring."""

    def __init__(
        self,
        client: SyncClient,
        key_prefix: str,
        history_length: int = 50,
        popularity_size: int = 500,
        refresh_s: float = 1.0,
        clock: Any = time.time,
        reads: RoundTrip | None = None,
        refresh_inline: bool = True,
    ) -> None:
        self._client = client
        self._reads = reads
        """The per-batch round trip's fast path (the serving thread's own); else redis-py's
        pipeline (which on a Redis Cluster, too, sends each node its keys' commands)."""
        self.keys = FeatureKeys(key_prefix)
        self.serving_keys = ServingKeys(key_prefix)
        self._history = history_length
        self._popularity_size = popularity_size
        self._refresh_s = refresh_s
        self._clock = clock
        self._config = ServingConfig(frozenset(), None)
        self._popular: list[tuple[str, float]] = []
        self._newest_bucket: int | None = None
        self._refreshed_at = -math.inf
        self._refresh_inline = refresh_inline
        """False: batches never refresh; the owner calls `refresh` on a thread of its own."""
        self._refresh_lock = threading.Lock()
        self._categories: dict[str, str] = {}

    @property
    def config(self) -> ServingConfig:
        return self._config

    def read(self, requests: Sequence[RecommendationRequest]) -> BatchFeatures:
        commands = [c for r in requests for c in self._context_commands(r)]
        refresh = self._refresh_inline and self._clock() - self._refreshed_at >= self._refresh_s
        if refresh:
            commands.extend(self._refresh_commands())
        replies = self._execute(commands)
        contexts = [self._context(r, replies[i * 4 : i * 4 + 4]) for i, r in enumerate(requests)]
        if refresh:
            self._apply_refresh(replies[len(requests) * 4 :])
        return BatchFeatures(contexts, self._config, self._popular)

    def refresh(self) -> None:
        """Re-reads the unavailable items, the rules and the popularity lists now, through
        redis-py's thread-safe client (never the request thread's own round trip)."""
        with self._refresh_lock:
            self._apply_refresh(self._execute(self._refresh_commands(), lean=False), lean=False)

    def _execute(self, commands: list[tuple[Arg, ...]], lean: bool = True) -> list[Any]:
        """Raw replies (RESP2 shapes: HMGET a list, ZREVRANGE WITHSCORES a flat list)."""
        if lean and self._reads is not None:
            return self._reads.execute(commands)
        pipe = self._client.pipeline(transaction=False)
        for args in commands:
            pipe.execute_command(*args)
        return pipe.execute()

    def _context_commands(self, request: RecommendationRequest) -> list[tuple[Arg, ...]]:
        session = request.session_id or ""
        last = self._history - 1
        return [
            ("HMGET", self.keys.user(request.user_id), *USER_FIELDS),
            ("LRANGE", self.keys.user_sequence(request.user_id), 0, last),
            ("HMGET", self.keys.session(session), *SESSION_FIELDS),
            ("LRANGE", self.keys.session_sequence(session), 0, last),
        ]

    def _context(self, request: RecommendationRequest, replies: list[Any]) -> UserContext:
        user, user_seq, session, session_seq = replies
        counters = {
            name: value
            for name, raw in zip(COUNTER_FIELDS, user[2:], strict=True)
            if (value := _number(raw)) is not None
        }
        if request.session_id is not None:
            counters["session_events"] = _number(session[1]) or 0.0
        else:
            session_seq = []
        stamps = [t for t in (_number(user[0]), _number(session[0])) if t is not None]
        return UserContext(
            user_id=request.user_id,
            session_id=request.session_id,
            user_events=parse_sequence(user_seq),
            session_events=parse_sequence(session_seq),
            counters=counters,
            last_event_ts=max(stamps) if stamps else None,
            feature_lag_ms=_number(user[1]),
        )

    def _refresh_commands(self) -> list[tuple[Arg, ...]]:
        bucket = self._newest_bucket if self._newest_bucket is not None else -1
        return [
            ("SMEMBERS", self.serving_keys.unavailable),
            ("GET", self.serving_keys.rules),
            ("GET", self.serving_keys.experiment),
            *(("HGET", shard, layout.NEWEST_HOUR) for shard in self.keys.popularity_shards()),
            *self._popularity_commands(bucket),
        ]

    def _popularity_commands(self, bucket: int) -> list[tuple[Arg, ...]]:
        """The newest and the previous bucket's top items of every popularity shard (an item
        counts in one shard only, so the shards' lists merge without overlap)."""
        size = self._popularity_size - 1
        return [
            ("ZREVRANGE", self.keys.popularity_bucket(shard, h), 0, size, "WITHSCORES")
            for h in (bucket, bucket - 1)
            for shard in range(POPULARITY_SHARDS)
        ]

    def _apply_refresh(self, replies: list[Any], lean: bool = True) -> None:
        unavailable, rules, experiment = replies[:CONFIG_REPLIES]
        newest = replies[CONFIG_REPLIES : CONFIG_REPLIES + POPULARITY_SHARDS]
        self._config = ServingConfig(
            frozenset(m.decode() for m in unavailable), parse_document(BusinessRules, rules),
            parse_document(Experiment, experiment),
        )
        buckets = [int(n) for raw in newest if (n := _number(raw)) is not None]
        bucket = max(buckets) if buckets else None
        current, previous = _buckets(replies[CONFIG_REPLIES + POPULARITY_SHARDS :])
        if bucket != self._newest_bucket:
            # The bucket moved on (or this is the first read): the lists fetched are stale.
            self._newest_bucket = bucket
            self._refreshed_at = -math.inf
            if bucket is not None:
                current, previous = self._popularity_now(bucket, lean)
        else:
            self._refreshed_at = self._clock()
        self._popular = merge_popularity(current, previous, 2 * self._popularity_size)

    def _popularity_now(self, bucket: int, lean: bool) -> tuple[list[Any], list[Any]]:
        current, previous = _buckets(self._execute(self._popularity_commands(bucket), lean))
        self._refreshed_at = self._clock()
        return current, previous

    def categories(self, item_ids: Sequence[str]) -> dict[str, str]:
        """Categories of `item_ids` that have one; unknown ones are fetched in one round trip.

        Cached for the process lifetime: an item's category is its catalog placement and is
        not expected to change (a changed one is picked up after a restart)."""
        missing = [i for i in dict.fromkeys(item_ids) if i not in self._categories]
        if missing:
            pipe = self._client.pipeline(transaction=False)
            for item_id in missing:
                pipe.hget(self.keys.item(item_id), layout.CATEGORY)
            self._cache_categories(missing, pipe.execute())
        return {i: c for i in item_ids if (c := self._categories.get(i, ""))}

    def _cache_categories(self, item_ids: Sequence[str], raw: Sequence[Any]) -> None:
        if len(self._categories) + len(item_ids) > MAX_CACHED_CATEGORIES:
            self._categories.clear()
        for item_id, category in zip(item_ids, raw, strict=True):
            self._categories[item_id] = _text(category) or ""

    def item_states(self, item_ids: Sequence[str]) -> StateArrays:
        """The state of each of `item_ids` now, in their order, in one round trip."""
        replies = self._execute(
            [("HMGET", self.keys.item(item_id), *ITEM_STATE_FIELDS) for item_id in item_ids]
        ) if item_ids else []
        return item_state_arrays(replies)

    def load_items(self, item_ids: Sequence[str]) -> StateArrays:
        """What a version needs of its items before it serves, in one read of their hashes
        through redis-py (thread-safe, off the request thread): their states, returned, and
        their categories, cached, so that filters never wait on a cold cache."""
        replies = self._execute(
            [("HMGET", self.keys.item(item_id), *ITEM_STATE_FIELDS, layout.CATEGORY)
             for item_id in item_ids], lean=False,
        ) if item_ids else []
        self._cache_categories(item_ids, [reply[-1] for reply in replies])
        return item_state_arrays([reply[:-1] for reply in replies])


def item_state_arrays(replies: Sequence[Sequence[Any]]) -> StateArrays:
    """Item hashes' ITEM_STATE_FIELDS (HMGET replies) as StateArrays. The feature script writes
    the times and counters as plain numbers, parsed straight from the bytes (the item state table
    re-reads thousands a second); a value that is not a finite number counts as missing."""
    try:
        flat = [math.nan if v is None else float(v) for reply in replies for v in reply]
    except ValueError:
        flat = [math.nan if (n := _number(v)) is None else n for reply in replies for v in reply]
    values = np.array(flat, dtype=np.float64).reshape(len(replies), len(ITEM_STATE_FIELDS))
    values[~np.isfinite(values)] = np.nan
    return values[:, 0].copy(), values[:, 1].copy(), np.nansum(values[:, 2:], axis=1)


def _buckets(replies: list[Any]) -> tuple[list[Any], list[Any]]:
    """The shards' (member, score) pairs of the newest bucket and of the previous one."""
    current = [p for reply in replies[:POPULARITY_SHARDS] for p in _pairs(reply)]
    previous = [p for reply in replies[POPULARITY_SHARDS:] for p in _pairs(reply)]
    return current, previous


def _pairs(reply: list[Any]) -> list[tuple[Any, Any]]:
    """ZREVRANGE ... WITHSCORES -> (member, score): RESP2 sends it flat (the lean read
    pipeline's shape); redis-py pairs it already."""
    if reply and isinstance(reply[0], list | tuple):
        return [(member, score) for member, score in reply]
    return list(zip(reply[::2], reply[1::2], strict=True))


def merge_popularity(
    current: list[Any], previous: list[Any], limit: int | None = None
) -> list[tuple[str, float]]:
    """Per item, the newest bucket's count plus PREVIOUS_BUCKET_WEIGHT times the previous one's,
    best first (ties by id), the first `limit`. In arrays: a refresh merges the shards'
    thousands of (member, score) pairs, and only the kept ones are decoded."""
    pairs = [*current, *previous]
    if not pairs:
        return []
    members = np.array([member for member, _ in pairs])  # bytes or text, as the reply holds
    scores = np.array([score for _, score in pairs]).astype(np.float64)
    scores[len(current) :] *= PREVIOUS_BUCKET_WEIGHT
    unique, inverse = np.unique(members, return_inverse=True)
    totals = np.bincount(inverse.ravel(), weights=scores, minlength=len(unique))
    # Byte order of UTF-8 ids is their code point order: ties sort as the decoded ids would.
    order = np.lexsort((unique, -totals))[:limit]
    return [(_plain_text(unique[i]), float(totals[i])) for i in order]


def _plain_text(member: np.bytes_ | np.str_) -> str:
    """A plain str, as every other reply is decoded: numpy's scalar types stay out of the ids."""
    return member.decode() if isinstance(member, bytes) else str(member)
