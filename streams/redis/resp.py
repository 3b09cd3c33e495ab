"""RESP for the lean Redis clients (the scorer's read pipeline, the worker's script connection).

Both pack commands themselves and parse replies with hiredis instead of going through redis-py's
per-command Python; error replies become the exceptions redis-py raises for them (its own
mapping, not a copy), so callers handle one set of errors whichever client they hold.
"""

from __future__ import annotations

from collections.abc import Sequence

from redis import exceptions
from redis._parsers.base import BaseParser

Arg = bytes | str | int | float


def pack(commands: Sequence[Sequence[Arg]]) -> bytes:
    """RESP arrays of bulk strings, as redis-py would send them. A command of ASCII text (the
    worker's script calls: ids are printable ASCII) is formatted as text and encoded once,
    which costs about half the per-argument byte formatting it falls back to otherwise."""
    out = []
    for args in commands:
        text = f"*{len(args)}\r\n" + "".join(
            [f"${len(a)}\r\n{a}\r\n" if type(a) is str else _text(a) for a in args]
        )
        if text.isascii():
            out.append(text.encode())
            continue
        out.append(b"*%d\r\n" % len(args))
        for arg in args:
            data = arg if isinstance(arg, bytes) else str(arg).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def _text(arg: Arg) -> str:
    """A non-str argument as RESP text; bytes that are not ASCII make the command's text
    non-ASCII, so it is packed as bytes instead."""
    data = arg.decode("latin-1") if isinstance(arg, bytes) else str(arg)
    return f"${len(data)}\r\n{data}\r\n"


def reply_error(message: str) -> exceptions.RedisError:
    """The exception redis-py raises for an error reply: "OOM ..." is OutOfMemoryError."""
    error: exceptions.RedisError = BaseParser.parse_error(message)  # type: ignore[no-untyped-call]
    return error
