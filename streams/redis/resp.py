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
    """RESP arrays of bulk strings, as redis-py would send them. Text arguments (ids are
    printable ASCII) are formatted as text and encoded once per run of them, which costs about
    half the per-argument byte formatting non-ASCII text falls back to; bytes arguments (the
    worker's packed updates) go in as they are."""
    out: list[bytes] = []
    for args in commands:
        out.append(b"*%d\r\n" % len(args))
        texts: list[str] = []
        for arg in args:
            if isinstance(arg, bytes):
                out.append(_bulk_texts(texts))
                texts = []
                out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
            else:
                texts.append(arg if type(arg) is str else str(arg))
        out.append(_bulk_texts(texts))
    return b"".join(out)


def _bulk_texts(texts: list[str]) -> bytes:
    text = "".join([f"${len(t)}\r\n{t}\r\n" for t in texts])
    if text.isascii():
        return text.encode()
    # Lengths count bytes: text that is not ASCII is sized by its UTF-8 encoding instead.
    return b"".join(b"$%d\r\n%s\r\n" % (len(d), d) for d in (t.encode() for t in texts))


def reply_error(message: str) -> exceptions.RedisError:
    """The exception redis-py raises for an error reply: "OOM ..." is OutOfMemoryError."""
    error: exceptions.RedisError = BaseParser.parse_error(message)  # type: ignore[no-untyped-call]
    return error
