"""RESP for the lean Redis clients (the scorer's read pipeline, the worker's script connection).

Both pack commands themselves and parse replies with hiredis instead of going through redis-py's
per-command Python; error replies become the exceptions redis-py raises for them, so callers
handle one set of errors whichever client they hold.
"""

from __future__ import annotations

from collections.abc import Sequence

from redis import exceptions

Arg = bytes | str | int | float

# Error codes redis-py turns into classes of their own, the code stripped from the message.
_ERRORS: dict[str, type[exceptions.RedisError]] = {
    "NOSCRIPT": exceptions.NoScriptError,
    "OOM": exceptions.OutOfMemoryError,
    "READONLY": exceptions.ReadOnlyError,
    "LOADING": exceptions.BusyLoadingError,
    "TRYAGAIN": exceptions.TryAgainError,
    "MASTERDOWN": exceptions.MasterDownError,
    "CLUSTERDOWN": exceptions.ClusterDownError,
    "NOPERM": exceptions.NoPermissionError,
    "NOAUTH": exceptions.AuthenticationError,
    "WRONGPASS": exceptions.AuthenticationError,
}


def pack(commands: Sequence[Sequence[Arg]]) -> bytes:
    """RESP arrays of bulk strings, as redis-py would send them."""
    out = []
    for args in commands:
        out.append(b"*%d\r\n" % len(args))
        for arg in args:
            data = arg if isinstance(arg, bytes) else str(arg).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def reply_error(message: str) -> exceptions.RedisError:
    """The exception redis-py raises for an error reply: "OOM ..." is OutOfMemoryError."""
    code, _, rest = message.partition(" ")
    if code == "ERR":
        return exceptions.ResponseError(rest)
    kind = _ERRORS.get(code)
    return kind(rest) if kind is not None else exceptions.ResponseError(message)
