"""The feature worker's Redis connection for script calls, without redis-py's per-call Python.

The worker sends a batch's script calls (one per entity) as one pipeline, written in slices as
they are built. Through redis-py's asyncio client one EVALSHA cost ~230 us of the worker's CPU
on a quiet machine of this kind (connection-pool lock, command packing, a timeout context, the
reader task), against ~60-75 us here: each slice's commands are packed into one RESP buffer,
written on an asyncio transport, and the replies parsed by hiredis in `data_received`, which
resolves the callers' futures directly.

Failures surface as the redis-py exceptions the pipeline already handles: a lost or refused
connection is `redis.ConnectionError`, no reply within the socket timeout is
`redis.TimeoutError` (the connection is then closed, since a late reply would answer the next
call), and error replies raise the class redis-py raises for their code (`NoScriptError`,
`OutOfMemoryError`, ...). The next call after a failure reconnects.

`on_connect` runs on every connection once it is logged in, before any caller's command: the
feature worker asks there which Redis process it reached (streams/feature_worker/redis_epoch.py),
and what it raises fails the connection and reaches the caller.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import hiredis
from redis import exceptions

from streams.redis.connection import RedisConnection
from streams.redis.resp import Arg, pack, reply_error

logger = logging.getLogger(__name__)

DEFAULT_IN_FLIGHT = 8
"""Calls a pipeline lets Redis hold unanswered. Redis runs what one client has queued a read
(16 KB) at a time, so a batch written whole keeps other clients (the scorer's reads) waiting
behind milliseconds of merges; a few calls queued keep Redis busy while the worker writes more."""


class _Replies(asyncio.Protocol):
    """Hands each parsed reply to the oldest waiting call (Redis answers in order)."""

    def __init__(self) -> None:
        self.reader = hiredis.Reader()
        self.waiting: deque[asyncio.Future[Any]] = deque()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            self.reader.feed(data)
            while (reply := self.reader.gets()) is not False:
                self._resolve(reply)
        except hiredis.ProtocolError as error:
            self.fail(exceptions.ConnectionError(f"redis script connection: {error}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.fail(exceptions.ConnectionError(f"redis script connection lost: {exc or 'closed'}"))

    def _resolve(self, reply: Any) -> None:
        if not self.waiting:  # a reply nobody asked for: the stream is out of step
            self.fail(exceptions.ConnectionError("redis script connection: unexpected reply"))
            return
        future = self.waiting.popleft()
        if future.done():  # its caller was cancelled: the reply was still that call's
            return
        if isinstance(reply, hiredis.ReplyError):
            future.set_exception(reply_error(str(reply)))
        else:
            future.set_result(reply)

    def fail(self, error: exceptions.RedisError) -> None:
        if self.transport is not None:
            self.transport.close()
            self.transport = None  # closing: never handed to another call
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(error)
                # Marked as seen: a pipeline that already raised for an earlier call of the
                # lot never awaits the rest, and asyncio would log each as never retrieved.
                future.exception()


OnConnect = Callable[[Callable[..., Awaitable[Any]]], Awaitable[None]]
"""Given the new connection's `execute`, checks it before anyone else uses it."""


class ScriptConnection:
    """One TCP connection, opened on first use and after any failure. Calls may overlap (replies
    are matched to calls in order, and one connection is opened at a time); the worker sends one
    pipeline at a time, with at most `in_flight` of its calls unanswered."""

    def __init__(
        self,
        connection: RedisConnection,
        in_flight: int = DEFAULT_IN_FLIGHT,
        on_connect: OnConnect | None = None,
    ) -> None:
        if in_flight < 1:
            raise ValueError("in_flight must be at least 1")
        self._in_flight = in_flight
        self._address = (connection.host, connection.port)
        self._username = connection.username
        self._password = connection.resolved_password()
        self._timeout_s = connection.socket_timeout_s
        self._on_connect = on_connect
        self._replies: _Replies | None = None
        self._connecting = asyncio.Lock()

    @staticmethod
    def slot(key: str) -> int:
        """One Redis serves every key, so a script call may name any keys together."""
        return 0

    async def evalsha(self, sha: str, numkeys: int, *args: Arg) -> Any:
        return await self.execute("EVALSHA", sha, numkeys, *args)

    async def script_load(self, script: str) -> str:
        sha = await self.execute("SCRIPT", "LOAD", script)
        return sha.decode() if isinstance(sha, bytes) else str(sha)

    async def aclose(self) -> None:
        async with self._connecting:  # not half-way through opening one
            if self._replies is not None:
                self._replies.fail(exceptions.ConnectionError("redis script connection closed"))
            self._replies = None

    async def pipeline(self, slices: Iterable[Sequence[Sequence[Arg]]]) -> list[Any]:
        """Every command's reply, an error reply as its exception (not raised). Each slice of
        commands is written as soon as the iterable yields it, so Redis runs the first while
        the caller builds the next, in writes of half the `in_flight` bound, each once the
        calls unanswered leave it room.

        Redis answers in order, so the last reply arriving means all have; a lost connection or
        a missing reply raises (as `execute` does) and the caller re-sends the lot."""
        replies = await self._connected()
        futures: list[asyncio.Future[Any]] = []
        step = max(1, self._in_flight // 2)
        for commands in slices:
            for start in range(0, len(commands), step):
                part = commands[start : start + step]
                await self._answered(replies, futures, len(futures) + len(part) - self._in_flight)
                futures += self._write(replies, part)
                transport = replies.transport
                if transport is not None and transport.get_write_buffer_size():
                    await asyncio.sleep(0)  # the loop flushes what the socket did not take
        await self._answered(replies, futures, len(futures))
        return [f.exception() or f.result() for f in futures]

    def _write(
        self, replies: _Replies, commands: Sequence[Sequence[Arg]]
    ) -> list[asyncio.Future[Any]]:
        transport = replies.transport
        if transport is None:
            raise exceptions.ConnectionError("redis script connection closed")
        data = pack(commands)  # before queuing: a command that cannot be packed is not sent
        loop = asyncio.get_running_loop()
        sent = [loop.create_future() for _ in commands]
        replies.waiting.extend(sent)
        try:
            transport.write(data)
        except Exception as error:
            replies.fail(exceptions.ConnectionError(f"redis script connection: {error!r}"))
            raise exceptions.ConnectionError(f"redis script connection: {error!r}") from error
        return sent

    async def _answered(
        self, replies: _Replies, futures: list[asyncio.Future[Any]], count: int
    ) -> None:
        """Waits, within the socket timeout, until the first `count` calls of `futures` are
        answered (in order, so until the last of them is); a lost connection raises."""
        if count <= 0:
            return
        last = futures[count - 1]
        if not last.done():
            expiry = asyncio.get_running_loop().call_later(
                self._timeout_s, self._expire, replies, last
            )
            try:
                await last
            except Exception:  # an error reply is its caller's to read; a lost connection's
                pass  # is raised below
            finally:
                expiry.cancel()
        if isinstance(last.exception(), exceptions.ConnectionError | exceptions.TimeoutError):
            raise last.exception()  # type: ignore[misc]

    async def execute(self, *command: Arg) -> Any:
        """One command's reply; a connection found closed is reopened first."""
        replies = await self._connected()
        return await self._send(replies, command)

    async def _send(self, replies: _Replies, command: tuple[Arg, ...]) -> Any:
        (future,) = self._write(replies, [command])
        expiry = asyncio.get_running_loop().call_later(
            self._timeout_s, self._expire, replies, future
        )
        try:
            return await future
        finally:
            expiry.cancel()

    def _expire(self, replies: _Replies, future: asyncio.Future[Any]) -> None:
        if future.done():
            return
        future.set_exception(exceptions.TimeoutError("redis script call timed out"))
        # Replies are matched to calls by order: after a missing one, the stream cannot be
        # trusted, so the connection goes and the next call opens a new one.
        replies.fail(exceptions.ConnectionError("redis script connection abandoned"))
        if self._replies is replies:
            self._replies = None

    async def _connected(self) -> _Replies:
        if self._replies is not None and self._replies.transport is not None:
            return self._replies
        async with self._connecting:
            if self._replies is not None and self._replies.transport is not None:
                return self._replies  # opened by a call that held the lock first
            self._replies = await self._open()
            return self._replies

    async def _open(self) -> _Replies:
        loop = asyncio.get_running_loop()
        try:
            _, replies = await asyncio.wait_for(
                loop.create_connection(_Replies, *self._address), self._timeout_s
            )
        except OSError as error:  # TimeoutError included
            raise exceptions.ConnectionError(f"redis script connection: {error!r}") from error
        try:
            # Always as the service's ACL user, as redis-py does: with no password found, an
            # empty one fails loudly instead of running as Redis's default user.
            await self._send(replies, ("AUTH", self._username, self._password or ""))
            if self._on_connect is not None:
                await self._on_connect(lambda *command: self._send(replies, command))
        except BaseException:  # cancelled too: the half-open connection must not leak
            replies.fail(exceptions.ConnectionError("redis script connection refused"))
            raise
        logger.info("redis script connection opened host=%s port=%d", *self._address)
        return replies
