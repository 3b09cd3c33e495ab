"""The feature-store read interface the scorer and the trainer use.

`read(user, session, items, as_of)` returns a typed `FeatureSet` (user, session, each item and
its category, cyclic time) from ONE pipelined round trip, plus `dense()` rows in the documented
`DENSE_FEATURES` order (streams/features/feature_set.py). Pass `item_categories` (the catalog
knows them) to keep it at one round trip; categories the store has to look up in the item
hashes cost one more. `popular_items` serves the recent-popularity baseline and cold start.

Point in time: windows are summed and durations measured at `as_of` (bucket granularity: one
minute for 1 h, one hour for 24 h / 7 d). Totals and rates cover every event applied so far; a
trainer replaying history checks `newest_event_ts < event time` to detect leakage.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol, cast

import redis

from streams.features.definitions import POPULARITY_HOURS
from streams.features.feature_set import FeatureSet
from streams.features.keys import FeatureKeys
from streams.features.views import (
    Hash,
    ItemFeatures,
    Rates,
    SessionFeatures,
    TimeFeatures,
    UserFeatures,
    read_category,
)
from streams.features.windows import HOURS, MINUTES
from streams.redis.connection import RedisConnection

MAX_ITEMS = 1000
"""Most candidate items one read may ask for (the scorer sends a few hundred)."""


class FeatureStore(Protocol):
    def read(
        self,
        user_id: str,
        session_id: str,
        item_ids: Sequence[str],
        as_of: float | None = None,
        item_categories: Mapping[str, str] | None = None,
    ) -> FeatureSet: ...

    def popular_items(
        self, k: int, as_of: float | None = None, hours: int = POPULARITY_HOURS
    ) -> list[tuple[str, float]]: ...


def _text(raw: Mapping[bytes, bytes]) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in raw.items()}


class _Reads:
    """Queues HGETALL/LRANGE calls on a pipeline and hands each reply back by name."""

    def __init__(self, client: redis.Redis) -> None:
        self._pipe = client.pipeline(transaction=False)
        self._names: list[tuple[str, ...]] = []
        self.replies: dict[tuple[str, ...], Any] = {}

    def hash(self, name: tuple[str, ...], key: str) -> None:
        self._pipe.hgetall(key)
        self._names.append(name)

    def entity(self, name: tuple[str, ...], key: str) -> None:
        """The entity hash and its minute and hour bucket hashes."""
        self.hash((*name, ""), key)
        self.hash((*name, MINUTES.name), f"{key}:{MINUTES.name}")
        self.hash((*name, HOURS.name), f"{key}:{HOURS.name}")

    def list(self, name: tuple[str, ...], key: str) -> None:
        self._pipe.lrange(key, 0, -1)
        self._names.append(name)

    def execute(self) -> None:
        # On Redis Cluster, redis-py's cluster pipeline splits this by slot, still in parallel.
        for name, reply in zip(self._names, self._pipe.execute(), strict=True):
            self.replies[name] = (
                _text(reply) if isinstance(reply, dict) else [v.decode() for v in reply]
            )

    def hashes(self, *name: str) -> tuple[Hash, Hash, Hash]:
        r = self.replies
        return r[(*name, "")], r[(*name, MINUTES.name)], r[(*name, HOURS.name)]


class RedisFeatureStore:
    """Reads with any ACL user allowed +@read on the prefix (scorer, trainer, monitor)."""

    def __init__(self, client: redis.Redis, key_prefix: str) -> None:
        self._client = client
        self._keys = FeatureKeys(key_prefix)

    @classmethod
    def connect(cls, connection: RedisConnection) -> RedisFeatureStore:
        return cls(connection.client(), connection.key_prefix)

    def read(
        self,
        user_id: str,
        session_id: str,
        item_ids: Sequence[str],
        as_of: float | None = None,
        item_categories: Mapping[str, str] | None = None,
    ) -> FeatureSet:
        if len(item_ids) > MAX_ITEMS:
            raise ValueError(f"at most {MAX_ITEMS} items per read, got {len(item_ids)}")
        as_of = time.time() if as_of is None else as_of
        given = dict(item_categories or {})
        k = self._keys
        reads = _Reads(self._client)
        reads.entity(("user",), k.user(user_id))
        reads.list(("user_seq",), k.user_sequence(user_id))
        reads.hash(("session",), k.session(session_id))
        reads.list(("session_seq",), k.session_sequence(session_id))
        reads.hash(("global",), k.popularity())
        for item in dict.fromkeys(item_ids):
            reads.entity(("item", item), k.item(item))
        for category in set(given.values()):
            reads.entity(("category", category), k.category(category))
        reads.execute()
        r = reads.replies
        prior = Rates.read(r[("global",)])
        items = [
            ItemFeatures.read(i, *reads.hashes("item", i), prior, as_of, given.get(i))
            for i in item_ids
        ]
        categories = self._categories(
            reads, {i.category for i in items if i.category}, prior, as_of
        )
        items = [replace(i, category_features=categories.get(i.category or "")) for i in items]
        user = UserFeatures.read(user_id, *reads.hashes("user"), r[("user_seq",)], as_of)
        session = SessionFeatures.read(session_id, r[("session",)], r[("session_seq",)], as_of)
        stamps = [user.newest_event_ts, session.newest_event_ts]
        stamps += [i.newest_event_ts for i in items]
        stamps += [c.newest_event_ts for c in categories.values()]
        known = [s for s in stamps if s is not None]
        return FeatureSet(
            as_of=as_of,
            time=TimeFeatures.at(as_of),
            user=user,
            session=session,
            items=tuple(items),
            newest_event_ts=max(known) if known else None,
        )

    def _categories(
        self, reads: _Reads, wanted: set[str], prior: Rates, as_of: float
    ) -> dict[str, Any]:
        missing = [c for c in wanted if ("category", c, "") not in reads.replies]
        if missing:  # categories the caller did not pass: one more round trip
            more = _Reads(self._client)
            for category in missing:
                more.entity(("category", category), self._keys.category(category))
            more.execute()
            reads.replies.update(more.replies)
        return {c: read_category(c, *reads.hashes("category", c), prior, as_of) for c in wanted}

    def popular_items(
        self, k: int, as_of: float | None = None, hours: int = POPULARITY_HOURS
    ) -> list[tuple[str, float]]:
        """The k items with the most interactions in the `hours` hourly buckets up to `as_of`."""
        hour = HOURS.bucket(time.time() if as_of is None else as_of)
        keys = [
            self._keys.popularity_hour(h)
            for h in range(hour - min(hours, POPULARITY_HOURS) + 1, hour + 1)
        ]
        scored = cast(list[tuple[bytes, float]], self._client.zunion(keys, withscores=True))
        ranked = sorted(((m.decode(), float(s)) for m, s in scored), key=lambda p: (-p[1], p[0]))
        return ranked[:k]
