"""The scorer's feature-read boundary: one pipelined round trip per micro-batch, to one Redis or
to every master of a Redis Cluster, without redis-py's per-command Python.

A batch reads four keys per request (and the configuration refresh a few more), each command one
key (its first argument). Through redis-py that round trip cost ~230 us of the serving thread's
CPU for one request on one Redis (command objects, callbacks, pool bookkeeping), and its cluster
pipeline 390 us for one request and 8.6 ms for 64 on a 2-core VM (per command: key extraction,
a slot lookup). Here the commands are packed into one RESP buffer per node and the replies
parsed by hiredis (already redis-py's parser): 82 us and 1.3 ms on one Redis, 142 us and 2.4 ms
on three masters. On a cluster the commands are grouped by the master of their key's slot and
sent to every master before any reply is read (the masters answer in parallel), and the replies
are put back in the batch's order.

Waiting for a reply: Redis answers a batch's reads in ~40 us, but a blocking `recv` on these VMs
costs 70-90 us of CPU and 180-250 us of wall time (the idle vCPU halts, and waking it is a VM
exit). So a reply is first awaited with non-blocking reads for at most `spin_s`, then in
`select()` until the socket timeout. The spin is bounded: when Redis is busy (a feature script
runs for a few ms), the thread blocks instead of taking a core from it.

The slot map is redis-py's (`RedisCluster.nodes_manager`, filled from CLUSTER SLOTS). When slots
move (resharding, failover) a node answers MOVED or ASK: that batch is read again through
redis-py's cluster pipeline, which follows the redirects and updates the map, and the next batch
uses the lean path again. Any connection failure closes every node's connection (replies still
unread on one must not answer the next batch), raises redis.ConnectionError, and on a cluster has
the slot map read again before the next batch; the next call reconnects. An error reply raises
redis-py's exception for it, after every reply of the batch was read.

Not thread-safe: only the serving thread uses it.
"""

from __future__ import annotations

import logging
import select
import socket
import time
from collections.abc import Sequence
from typing import Any

import hiredis
import redis
from redis.crc import key_slot
from redis.exceptions import AskError, MovedError, TryAgainError

from streams.redis.connection import RedisConnection, SyncClient
from streams.redis.resp import Arg, pack, reply_error

logger = logging.getLogger(__name__)

RECV_BYTES = 256 * 1024
REDIRECTS = (MovedError, AskError, TryAgainError)
"""Replies that say a slot is moving: redis-py's pipeline follows them."""
Address = tuple[str, int]


def raise_for_errors(replies: list[Any]) -> list[Any]:
    """The replies, or redis-py's exception for the first error reply among them."""
    for reply in replies:
        if isinstance(reply, hiredis.ReplyError):
            raise reply_error(str(reply))
    return replies


class FeatureReads:
    """The round trip on one Redis (`target` its address) or on a cluster (`target` redis-py's
    cluster client, whose slot map routes each key)."""

    def __init__(
        self,
        target: Address | redis.RedisCluster,
        username: str | None,
        password: str | None,
        timeout_s: float,
        spin_s: float,
    ) -> None:
        self._cluster = target if isinstance(target, redis.RedisCluster) else None
        self._address = target if not isinstance(target, redis.RedisCluster) else None
        self._auth = (username or "default", password) if password else None
        self._timeout_s = timeout_s
        self._spin_s = spin_s
        self._nodes: dict[Address, _Node] = {}
        self._map_stale = False
        """A node failed: ask the cluster for its slot map again (a failover may have moved
        its slots to another node) before the next batch."""

    @classmethod
    def connect(
        cls, connection: RedisConnection, client: SyncClient, spin_s: float
    ) -> FeatureReads:
        """The round trip of a service whose settings built `client` (one Redis or a cluster)."""
        target = client if isinstance(client, redis.RedisCluster) else (connection.host,
                                                                        connection.port)
        return cls(target, connection.username, connection.resolved_password(),
                   connection.socket_timeout_s, spin_s)

    @property
    def cluster(self) -> bool:
        return self._cluster is not None

    def execute(self, commands: Sequence[Sequence[Arg]]) -> list[Any]:
        """The replies, in order; raises redis.ResponseError for the first error reply."""
        if self._map_stale and self._cluster is not None:
            self._cluster.nodes_manager.initialize()
            self._map_stale = False
        try:
            replies = self._round_trip(commands)
        except redis.ConnectionError:
            self.close()
            self._map_stale = self._cluster is not None
            raise
        if self._cluster is not None and self._redirected(replies):
            return self._through_redis_py(self._cluster, commands)
        return raise_for_errors(replies)

    def close(self) -> None:
        for node in self._nodes.values():
            node.close()

    def _round_trip(self, commands: Sequence[Sequence[Arg]]) -> list[Any]:
        if self._address is not None:
            node = self._node(self._address)
            node.send(commands)
            return node.receive(len(commands))
        groups = self._by_node(commands)
        replies: list[Any] = [None] * len(commands)
        for address, indices in groups.items():
            self._nodes[address].send([commands[i] for i in indices])
        for address, indices in groups.items():
            for i, reply in zip(indices, self._nodes[address].receive(len(indices)), strict=True):
                replies[i] = reply
        return replies

    def _node(self, address: Address) -> _Node:
        node = self._nodes.get(address)
        if node is None:
            node = self._nodes[address] = _Node(address, self._auth, self._timeout_s, self._spin_s)
        return node

    def _by_node(self, commands: Sequence[Sequence[Arg]]) -> dict[Address, list[int]]:
        assert self._cluster is not None
        groups: dict[Address, list[int]] = {}
        slots = self._cluster.nodes_manager
        for i, command in enumerate(commands):
            owner = slots.get_node_from_slot(key_slot(_encoded(command[1])))
            address = (owner.host, owner.port)
            self._node(address)
            groups.setdefault(address, []).append(i)
        return groups

    @staticmethod
    def _redirected(replies: list[Any]) -> bool:
        redirected = [r for r in replies if isinstance(r, hiredis.ReplyError)
                      and isinstance(reply_error(str(r)), REDIRECTS)]
        if redirected:
            logger.info("slots moved, batch read through redis-py reply=%s",
                        str(redirected[0]).split(" ")[0])
        return bool(redirected)

    @staticmethod
    def _through_redis_py(
        cluster: redis.RedisCluster, commands: Sequence[Sequence[Arg]]
    ) -> list[Any]:
        pipe = cluster.pipeline(transaction=False)  # type: ignore[no-untyped-call]
        for args in commands:
            pipe.execute_command(*args)
        replies: list[Any] = pipe.execute()
        return replies


def _encoded(key: Arg) -> bytes:
    return key if isinstance(key, bytes) else str(key).encode()


class _Node:
    """One node's connection: sends without waiting, then reads that many replies."""

    def __init__(
        self, address: Address, auth: tuple[str, str] | None, timeout_s: float, spin_s: float
    ) -> None:
        self._address = address
        self._auth = auth
        self._timeout_s = timeout_s
        self._spin_s = spin_s
        self._sock: socket.socket | None = None
        self._reader = hiredis.Reader()

    def send(self, commands: Sequence[Sequence[Arg]]) -> None:
        try:
            self._send(self._connected(), pack(commands))
        except (OSError, hiredis.ProtocolError) as error:
            self.close()
            raise redis.ConnectionError(f"redis feature read: {error}") from error

    def receive(self, count: int) -> list[Any]:
        """The next `count` replies as parsed, error replies as `hiredis.ReplyError` values (all
        of a batch's replies are read, so the stream stays in step whatever they say)."""
        if self._sock is None:
            raise redis.ConnectionError("redis feature read: nothing sent")
        try:
            return self._replies(self._sock, count)
        except (OSError, hiredis.ProtocolError) as error:
            self.close()
            raise redis.ConnectionError(f"redis feature read: {error}") from error

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self._reader = hiredis.Reader()  # a half-read reply must not leak into the next call

    def _connected(self) -> socket.socket:
        if self._sock is not None:
            return self._sock
        sock = socket.create_connection(self._address, timeout=self._timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        self._sock = sock
        if self._auth is not None:
            self._send(sock, pack([("AUTH", *self._auth)]))
            (reply,) = self._replies(sock, 1)
            if isinstance(reply, hiredis.ReplyError):
                self.close()
                raise redis.AuthenticationError(str(reply))
        return sock

    def _send(self, sock: socket.socket, data: bytes) -> None:
        # The socket is non-blocking (for the spin): a send may take only part of a large batch.
        view = memoryview(data)
        while view:
            try:
                view = view[sock.send(view) :]
            except BlockingIOError:
                if not select.select([], [sock], [], self._timeout_s)[1]:
                    raise TimeoutError(f"could not send within {self._timeout_s}s") from None

    def _replies(self, sock: socket.socket, count: int) -> list[Any]:
        replies: list[Any] = []
        while len(replies) < count:
            reply = self._reader.gets()
            if reply is False:  # incomplete: read more
                self._reader.feed(self._receive(sock))
                continue
            replies.append(reply)
        return replies

    def _receive(self, sock: socket.socket) -> bytes:
        deadline = time.perf_counter() + self._spin_s
        while True:
            try:
                data = sock.recv(RECV_BYTES)
            except BlockingIOError:
                if time.perf_counter() < deadline:
                    continue
                if not select.select([sock], [], [], self._timeout_s)[0]:
                    raise TimeoutError(f"no reply within {self._timeout_s}s") from None
                continue
            if not data:
                raise ConnectionResetError("redis closed the connection")
            return data
