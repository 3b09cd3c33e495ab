from typing import Any

import redis
from redis import exceptions

from streams.redis.resp import pack, reply_error


def test_commands_are_packed_as_resp_arrays_of_bulk_strings() -> None:
    packed = pack([("GET", "k"), ("LRANGE", b"l\xff", 0, -1)])
    assert packed == (
        b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
        b"*4\r\n$6\r\nLRANGE\r\n$2\r\nl\xff\r\n$1\r\n0\r\n$2\r\n-1\r\n"
    )


def test_text_and_non_ascii_arguments_pack_as_redis_py_packs_them() -> None:
    connection: Any = redis.Connection  # redis-py's own packer is untyped
    reference = connection()
    for command in [
        ("EVALSHA", "a" * 40, 1, "u:{u1}", "50", 3.5, "u1 1700000000.5 view"),
        ("HSET", "k", "caf\u00e9", "\u00fc\u00df"),
        ("HMGET", b"k\xff\x00", "f", -3),
    ]:
        assert pack([command]) == b"".join(reference.pack_command(*command)), command


def test_error_replies_become_the_exceptions_redis_py_raises_for_them() -> None:
    full = reply_error("OOM command not allowed when used memory > 'maxmemory'.")
    assert type(full) is exceptions.OutOfMemoryError
    assert str(full) == "command not allowed when used memory > 'maxmemory'."
    assert type(reply_error("NOSCRIPT No matching script.")) is exceptions.NoScriptError
    assert type(reply_error("LOADING Redis is loading")) is exceptions.BusyLoadingError
    generic = reply_error("ERR user_script:1: bad argument")
    assert type(generic) is exceptions.ResponseError
    assert str(generic) == "user_script:1: bad argument"
    busy = reply_error("BUSY Redis is busy running a script.")
    assert type(busy) is exceptions.ResponseError
    assert str(busy) == "BUSY Redis is busy running a script."
