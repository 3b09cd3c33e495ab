"""The lean script connection against a stand-in server speaking RESP on loopback (the real
Redis is exercised by the integration tests; these pin down timeouts and reply matching)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import hiredis
import pytest
from redis import exceptions

from streams.features.script_connection import ScriptConnection
from streams.redis_connection import RedisConnection

Answer = Callable[[list[bytes]], bytes | None]


async def _server(answer: Answer) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        parser = hiredis.Reader()
        while data := await reader.read(65536):
            parser.feed(data)
            while (command := parser.gets()) is not False:
                reply = answer(command)
                if reply is not None:
                    writer.write(reply)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _connection(port: int, timeout_s: float = 5.0) -> ScriptConnection:
    return ScriptConnection(
        RedisConnection(port=port, password="pw", socket_timeout_s=timeout_s)
    )


def test_a_call_authenticates_first_and_returns_the_parsed_reply() -> None:
    seen: list[list[bytes]] = []

    def answer(command: list[bytes]) -> bytes:
        seen.append(command)
        return b"+OK\r\n" if command[0] == b"AUTH" else b"*2\r\n:3\r\n:1\r\n"

    async def run() -> object:
        server, port = await _server(answer)
        async with server:
            client = _connection(port)
            reply = await client.evalsha("abc", 0, "a", 7)
            await client.aclose()
            return reply

    assert asyncio.run(run()) == [3, 1]
    assert seen == [[b"AUTH", b"streams", b"pw"], [b"EVALSHA", b"abc", b"0", b"a", b"7"]]


def test_an_error_reply_raises_the_class_redis_py_would() -> None:
    def answer(command: list[bytes]) -> bytes:
        return b"+OK\r\n" if command[0] == b"AUTH" else b"-NOSCRIPT No matching script.\r\n"

    async def run() -> None:
        server, port = await _server(answer)
        async with server:
            client = _connection(port)
            with pytest.raises(exceptions.NoScriptError):
                await client.evalsha("abc", 0)
            await client.aclose()

    asyncio.run(run())


def test_a_missing_reply_times_out_and_the_next_call_uses_a_new_connection() -> None:
    evalshas = 0

    def answer(command: list[bytes]) -> bytes | None:
        nonlocal evalshas
        if command[0] == b"AUTH":
            return b"+OK\r\n"
        evalshas += 1
        return None if evalshas == 1 else b":1\r\n"  # the first call is never answered

    async def run() -> object:
        server, port = await _server(answer)
        async with server:
            client = _connection(port, timeout_s=0.2)
            with pytest.raises(exceptions.TimeoutError):
                await client.evalsha("abc", 0)
            reply = await client.evalsha("abc", 0)
            await client.aclose()
            return reply

    assert asyncio.run(run()) == 1


def test_a_cancelled_call_does_not_take_the_next_calls_reply() -> None:
    def answer(command: list[bytes]) -> bytes:
        return b"+OK\r\n" if command[0] == b"AUTH" else b"$%d\r\n%s\r\n" % (
            len(command[3]), command[3]
        )

    async def run() -> object:
        server, port = await _server(answer)
        async with server:
            client = _connection(port)
            await client.evalsha("abc", 1, "first")  # connected and authenticated
            slow = asyncio.ensure_future(client.evalsha("abc", 1, "second"))
            await asyncio.sleep(0)
            slow.cancel()
            reply = await client.evalsha("abc", 1, "third")
            await client.aclose()
            return reply

    assert asyncio.run(run()) == b"third"


def test_a_refused_connection_is_a_connection_error() -> None:
    async def run() -> None:
        server, port = await _server(lambda command: None)
        server.close()
        await server.wait_closed()
        with pytest.raises(exceptions.ConnectionError):
            await _connection(port).evalsha("abc", 0)

    asyncio.run(run())
