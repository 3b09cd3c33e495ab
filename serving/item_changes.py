"""Which items changed in Redis since the last look: Redis's own invalidation messages
(server-assisted client-side caching, broadcast mode), from every master.

The scorer's item state table (serving/item_state_table.py) re-reads an item only when the
feature worker wrote to it. Redis tells which: a RESP3 connection per master runs
`CLIENT TRACKING ON BCAST PREFIX <prefix>i:{`, and after each event loop iteration that wrote
keys under that prefix Redis pushes their names, one message for all of them. The connections
only receive; `changed` takes what arrived without waiting.

A change can be missed only while a connection is not up (before the first look, after a lost
connection, on a master that joined the cluster) or when a database is flushed: `changed` then
answers None, and the caller reads every item again.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from typing import Any

import hiredis
import redis

from streams.features.keys import FeatureKeys
from streams.redis.connection import RedisConnection, SyncClient
from streams.redis.resp import pack

logger = logging.getLogger(__name__)

Address = tuple[str, int]
RECV_BYTES = 1 << 20


def masters(connection: RedisConnection, client: SyncClient) -> Callable[[], list[Address]]:
    """The Redis masters now: the cluster's (its slot map) or the one Redis."""
    if isinstance(client, redis.RedisCluster):
        cluster = client
        return lambda: [
            (node.host, node.port)
            for node in cluster.get_primaries()  # type: ignore[no-untyped-call]
        ]
    address = (connection.host, connection.port)
    return lambda: [address]


class _Tracking:
    """One master's invalidation messages for the keys under `prefix`."""

    def __init__(self, address: Address, prefix: str, username: str | None,
                 password: str | None, timeout_s: float) -> None:
        self._reader = hiredis.Reader()
        self._sock = socket.create_connection(address, timeout=timeout_s)
        hello: tuple[str, ...] = ("HELLO", "3")
        if password:
            hello = (*hello, "AUTH", username or "default", password)
        self._sock.sendall(pack([hello, ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", prefix)]))
        for _ in range(2):
            reply = self._next_reply()
            if isinstance(reply, hiredis.ReplyError):
                self.close()
                raise redis.ConnectionError(f"item change tracking refused: {reply}")
        self._sock.setblocking(False)

    def _next_reply(self) -> Any:
        while (reply := self._reader.gets()) is False:
            data = self._sock.recv(RECV_BYTES)
            if not data:
                raise redis.ConnectionError("item change tracking: connection closed")
            self._reader.feed(data)
        return reply

    def drain(self) -> list[bytes] | None:
        """The keys written since the last drain; None when a flush invalidated every key."""
        while True:
            try:
                data = self._sock.recv(RECV_BYTES)
            except BlockingIOError:
                break
            if not data:
                raise redis.ConnectionError("item change tracking: connection closed")
            self._reader.feed(data)
        keys: list[bytes] = []
        flushed = False
        while (message := self._reader.gets()) is not False:
            if isinstance(message, list) and len(message) == 2 and message[0] == b"invalidate":
                if message[1] is None:
                    flushed = True
                else:
                    keys.extend(message[1])
        return None if flushed else keys

    def close(self) -> None:
        self._sock.close()


class ItemChanges:
    @classmethod
    def connect(cls, connection: RedisConnection, client: SyncClient) -> ItemChanges:
        """Changes of the items under the connection's key prefix, on every master `client`
        reaches."""
        return cls(masters(connection, client), FeatureKeys(connection.key_prefix),
                   connection.username, connection.resolved_password(),
                   connection.socket_timeout_s)

    def __init__(
        self,
        masters: Callable[[], list[Address]],
        keys: FeatureKeys,
        username: str | None,
        password: str | None,
        timeout_s: float,
    ) -> None:
        self._masters = masters
        """The masters now: one address on a single Redis, the cluster's slot map otherwise."""
        self._prefix = keys.item("")[:-1]
        self._login = (username, password)
        self._timeout_s = timeout_s
        self._tracking: dict[Address, _Tracking] = {}

    def changed(self) -> set[str] | None:
        """Ids of the items written since the last call; None when a write may have gone
        unseen (read everything again). Raises redis.ConnectionError when a master cannot be
        reached (the next call tries again, and answers None)."""
        missed = False
        items: set[str] = set()
        start = len(self._prefix)
        for address, tracking in list(self._tracking.items()):
            try:
                keys = tracking.drain()
            except (OSError, hiredis.ProtocolError, redis.ConnectionError) as error:
                logger.warning("item change tracking lost master=%s:%d error=%s",
                               *address, type(error).__name__)
                self._tracking.pop(address).close()
                missed = True
                continue
            if keys is None:
                missed = True
                continue
            # The item hash itself (`<prefix>i:{<id>}`): its bucket keys change along with it.
            items.update(k[start:-1].decode(errors="replace") for k in keys if k.endswith(b"}"))
        # After the drain: a master lost above is tracked again at once.
        if self._follow_masters():
            missed = True
        return None if missed else items

    def _follow_masters(self) -> bool:
        """Tracks every master now (connecting to new ones); True when one was added."""
        masters = set(self._masters())
        for address in set(self._tracking) - masters:
            self._tracking.pop(address).close()
        added = False
        for address in masters - set(self._tracking):
            try:
                self._tracking[address] = _Tracking(address, self._prefix, *self._login,
                                                    self._timeout_s)
            except (OSError, hiredis.ProtocolError) as error:
                raise redis.ConnectionError(f"item change tracking: {error}") from error
            added = True
        return added

    def close(self) -> None:
        for tracking in self._tracking.values():
            tracking.close()
        self._tracking.clear()
