"""The lean script connection against a stand-in server speaking RESP on loopback (the real
Redis is exercised by the integration tests; these pin down timeouts and reply matching)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import cast

import hiredis
import pytest
from redis import exceptions

from streams.redis.connection import RedisConnection
from streams.redis.script_connection import ScriptConnection

Answer = Callable[[list[bytes]], bytes | None]


RESET = object()
"""An answer that drops the connection (a TCP reset) instead of replying."""


class _Server:
    """Answers each command with `answer(command)`: bytes now, a (delay_s, bytes) pair later,
    None never, or RESET by dropping the connection. Counts the connections it accepted."""

    def __init__(self, answer: Callable[[list[bytes]], object]) -> None:
        self.answer = answer
        self.connections = 0
        self.commands: list[list[bytes]] = []

    async def start(self) -> tuple[asyncio.Server, int]:
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return server, server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        parser = hiredis.Reader()
        while data := await reader.read(65536):
            parser.feed(data)
            while (command := parser.gets()) is not False:
                self.commands.append(command)
                reply = self.answer(command)
                if reply is RESET:
                    writer.transport.abort()
                    return
                if isinstance(reply, tuple):
                    asyncio.get_running_loop().call_later(reply[0], writer.write, reply[1])
                elif reply is not None:
                    writer.write(cast(bytes, reply))
        writer.close()


async def _server(answer: Answer) -> tuple[asyncio.Server, int]:
    return await _Server(answer).start()


def _connection(port: int, timeout_s: float = 5.0, in_flight: int = 8) -> ScriptConnection:
    return ScriptConnection(
        RedisConnection(port=port, password="pw", socket_timeout_s=timeout_s), in_flight
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


def _evalsha_answers(first: Callable[[], object], later: bytes) -> Callable[[list[bytes]], object]:
    """+OK to AUTH; the first EVALSHA answered by `first()`, every later one with `later`."""
    evalshas = 0

    def answer(command: list[bytes]) -> object:
        nonlocal evalshas
        if command[0] == b"AUTH":
            return b"+OK\r\n"
        evalshas += 1
        return first() if evalshas == 1 else later

    return answer


def test_a_missing_reply_times_out_and_the_next_call_uses_a_new_connection() -> None:
    # The first call's reply comes after its timeout, on the first connection; a client that
    # kept that connection would hand it to the second call.
    stand_in = _Server(_evalsha_answers(lambda: (0.4, b"$4\r\nlate\r\n"), b"$4\r\nmine\r\n"))

    async def run() -> object:
        server, port = await stand_in.start()
        async with server:
            client = _connection(port, timeout_s=0.2)
            with pytest.raises(exceptions.TimeoutError):
                await client.evalsha("abc", 0)
            reply = await client.evalsha("abc", 0)
            await asyncio.sleep(0.3)  # the late reply arrives on the abandoned connection
            await client.aclose()
            return reply

    assert asyncio.run(run()) == b"mine"
    assert stand_in.connections == 2


def test_a_connection_lost_mid_call_fails_that_call_and_the_next_reconnects() -> None:
    stand_in = _Server(_evalsha_answers(lambda: RESET, b":2\r\n"))

    async def run() -> object:
        server, port = await stand_in.start()
        async with server:
            client = _connection(port)
            with pytest.raises(exceptions.ConnectionError):
                await client.evalsha("abc", 0)
            reply = await client.evalsha("abc", 0)
            await client.aclose()
            return reply

    assert asyncio.run(run()) == 2
    assert stand_in.connections == 2


def test_calls_made_while_disconnected_share_one_new_connection() -> None:
    stand_in = _Server(lambda command: b"+OK\r\n" if command[0] == b"AUTH" else b":1\r\n")

    async def run() -> list[object]:
        server, port = await stand_in.start()
        async with server:
            client = _connection(port)
            replies = await asyncio.gather(*(client.evalsha("abc", 0) for _ in range(3)))
            await client.aclose()
            return list(replies)

    assert asyncio.run(run()) == [1, 1, 1]
    assert stand_in.connections == 1


def test_a_command_that_cannot_be_packed_leaves_the_connection_in_step() -> None:
    def answer(command: list[bytes]) -> bytes:
        return b"+OK\r\n" if command[0] == b"AUTH" else b"$%d\r\n%s\r\n" % (
            len(command[3]), command[3]
        )

    async def run() -> object:
        server, port = await _server(answer)
        async with server:
            client = _connection(port, timeout_s=1.0)
            await client.evalsha("abc", 1, "first")
            with pytest.raises(UnicodeEncodeError):
                await client.evalsha("abc", 1, "\ud800")  # a lone surrogate: no UTF-8 for it
            reply = await client.evalsha("abc", 1, "after")
            await client.aclose()
            return reply

    assert asyncio.run(run()) == b"after"


def test_a_user_without_a_password_still_logs_in_as_itself() -> None:
    stand_in = _Server(
        lambda command: b"-WRONGPASS invalid username-password pair\r\n"
        if command[0] == b"AUTH"
        else b":1\r\n"
    )

    async def run() -> None:
        server, port = await stand_in.start()
        async with server:
            client = ScriptConnection(RedisConnection(port=port, secrets_dir=Path("/nonexistent")))
            with pytest.raises(exceptions.AuthenticationError):
                await client.evalsha("abc", 0)

    asyncio.run(run())
    assert stand_in.commands == [[b"AUTH", b"streams", b""]]


def test_a_cancelled_call_does_not_take_the_next_calls_reply() -> None:
    def answer(command: list[bytes]) -> bytes:
        return b"+OK\r\n" if command[0] == b"AUTH" else b"$%d\r\n%s\r\n" % (
            len(command[3]), command[3]
        )

    stand_in = _Server(answer)

    async def run() -> object:
        server, port = await stand_in.start()
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
    sent = [command[3] for command in stand_in.commands if command[0] == b"EVALSHA"]
    assert sent == [b"first", b"second", b"third"]


def test_a_refused_connection_is_a_connection_error() -> None:
    async def run() -> None:
        server, port = await _server(lambda command: None)
        server.close()
        await server.wait_closed()
        with pytest.raises(exceptions.ConnectionError):
            await _connection(port).evalsha("abc", 0)

    asyncio.run(run())


def test_a_pipeline_leaves_at_most_in_flight_calls_unanswered_and_keeps_them_coming() -> None:
    unanswered: list[int] = [0]
    peaks: list[int] = []

    def answer(command: list[bytes]) -> object:
        if command[0] == b"AUTH":
            return b"+OK\r\n"
        unanswered[0] += 1
        peaks.append(unanswered[0])

        def answered() -> None:
            unanswered[0] -= 1

        asyncio.get_running_loop().call_later(0.004, answered)  # as the reply goes out
        return 0.004, b":%s\r\n" % command[-1]

    async def run() -> list[object]:
        server, port = await _Server(answer).start()
        async with server:
            client = _connection(port, in_flight=4)
            replies = await client.pipeline(
                [[("EVALSHA", "abc", 0, n) for n in range(10)], [("EVALSHA", "abc", 0, 10)]]
            )
            await client.aclose()
            return replies

    assert asyncio.run(run()) == list(range(11))
    assert max(peaks) == 4
