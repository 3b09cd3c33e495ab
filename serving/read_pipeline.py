"""The scorer's per-batch Redis round trip without redis-py's per-command Python.

One micro-batch reads four keys per request plus, once a second, the serving configuration: a
single pipelined round trip. Through redis-py that round trip cost ~230 us of the serving
thread's CPU for one request (command objects, callbacks, connection-pool bookkeeping); here the
commands are packed into one RESP buffer and the replies parsed by hiredis (already the
redis-py parser).

Waiting for the reply: Redis answers a batch's reads in ~40 us, but a blocking `recv` on these
VMs costs 70-90 us of CPU and 180-250 us of wall time (the idle vCPU halts, and waking it is a
VM exit). So the reply is first awaited with non-blocking reads for at most `spin_s`, then in
`poll()` until the socket timeout. The spin is bounded: when Redis is busy (a feature script
runs for a few ms), the thread blocks instead of taking a core from it.

Not thread-safe: only the serving thread uses it. Any failure closes the socket and raises a
redis-py error (the scorer then answers that batch one request at a time, as for any Redis
error); the next call reconnects.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Sequence
from typing import Any

import hiredis
import redis

from streams.redis.resp import Arg, pack, reply_error

RECV_BYTES = 256 * 1024


def raise_for_errors(replies: list[Any]) -> list[Any]:
    """The replies, or redis-py's exception for the first error reply among them."""
    for reply in replies:
        if isinstance(reply, hiredis.ReplyError):
            raise reply_error(str(reply))
    return replies


class ReadPipeline:
    def __init__(
        self,
        host: str,
        port: int,
        username: str | None,
        password: str | None,
        timeout_s: float,
        spin_s: float,
    ) -> None:
        self._address = (host, port)
        self._auth = (username or "default", password) if password else None
        self._timeout_s = timeout_s
        self._spin_s = spin_s
        self._sock: socket.socket | None = None
        self._reader = hiredis.Reader()

    def execute(self, commands: Sequence[Sequence[Arg]]) -> list[Any]:
        """The replies, in order; raises redis.ResponseError for the first error reply."""
        self.send(commands)
        return raise_for_errors(self.receive(len(commands)))

    def send(self, commands: Sequence[Sequence[Arg]]) -> None:
        """Sends without waiting: `receive` collects the replies (the cluster variant sends to
        every node first, so the nodes answer in parallel)."""
        try:
            self._send(self._connected(), pack(commands))
        except (OSError, hiredis.ProtocolError) as error:
            self.close()
            raise redis.ConnectionError(f"redis read pipeline: {error}") from error

    def receive(self, count: int) -> list[Any]:
        """The next `count` replies as parsed, error replies as `hiredis.ReplyError` values (all
        of a batch's replies are read, so the stream stays in step whatever they say)."""
        if self._sock is None:
            raise redis.ConnectionError("redis read pipeline: nothing sent")
        try:
            return self._replies(self._sock, count)
        except (OSError, hiredis.ProtocolError) as error:
            self.close()
            raise redis.ConnectionError(f"redis read pipeline: {error}") from error

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
