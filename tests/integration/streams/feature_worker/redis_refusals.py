"""Making the real redis-server refuse writes for a while, the ways production Redis does.

Each context manager brings Redis into the state, waits until a write is really refused with the
expected reply code, and restores the previous configuration on the way out.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import redis

from deploy.local.process import owned_pid
from deploy.local.redis import BINARY
from deploy.local.stack import LocalStack

Refusal = Callable[[LocalStack], contextlib.AbstractContextManager[None]]

_PROBE_KEY = "test:refusal-probe"

# Spins for ARGV[1] seconds without writing: Redis answers every other client BUSY meanwhile.
_SPIN = """
local stop = tonumber(redis.call('TIME')[1]) + tonumber(ARGV[1])
while tonumber(redis.call('TIME')[1]) < stop do end
return 1
"""


def _admin(stack: LocalStack, timeout_s: float = 2.0) -> redis.Redis:
    s = stack.settings
    password = (s.secrets_dir / "redis-admin").read_text().strip()
    return redis.Redis(
        host=s.host, port=s.redis_port, username="admin", password=password,
        socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
    )  # fmt: skip


def _wait_refused(stack: LocalStack, code: str, timeout_s: float = 10.0) -> None:
    """Until a plain write by the admin gets `code` back (the server really refuses)."""
    deadline = time.monotonic() + timeout_s
    seen = ""
    while time.monotonic() < deadline:
        try:
            _admin(stack).set(_PROBE_KEY, "1")
        except redis.RedisError as error:
            seen = f"{type(error).__name__}: {error}"
            if getattr(error, "status_code", None) == code or str(error).startswith(code):
                return
        time.sleep(0.05)
    raise TimeoutError(f"redis never refused with {code}; last: {seen or 'accepted'}")


@contextlib.contextmanager
def out_of_memory(stack: LocalStack) -> Iterator[None]:
    """maxmemory below what is used, under noeviction: every write is refused with OOM."""
    admin = _admin(stack)
    limit = str(admin.config_get("maxmemory")["maxmemory"])
    admin.config_set("maxmemory", 1)
    try:
        _wait_refused(stack, "OOM")
        yield
    finally:
        admin.config_set("maxmemory", limit)
        admin.delete(_PROBE_KEY)


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def _wait_bgsave(admin: redis.Redis, status: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        info = admin.info("persistence")
        if not info["rdb_bgsave_in_progress"] and info["rdb_last_bgsave_status"] == status:
            return
        time.sleep(0.05)
    raise TimeoutError(f"bgsave did not end with status {status}")


@contextlib.contextmanager
def cannot_persist(stack: LocalStack) -> Iterator[None]:
    """A failed background save with snapshots configured and stop-writes-on-bgsave-error on:
    Redis refuses writes with MISCONF until a save succeeds (a full disk does the same). The
    save is made to fail by killing its child, as Redis's own tests do."""
    admin = _admin(stack)
    server = owned_pid(stack.redis.pid_file, BINARY)
    assert server is not None, "the test's redis-server is not one the stack started"
    before = str(admin.config_get("save")["save"])
    admin.config_set("save", "3600 1")
    admin.config_set("stop-writes-on-bgsave-error", "yes")
    admin.config_set("rdb-key-save-delay", 1_000_000)  # the child lingers long enough to kill
    try:
        admin.bgsave()
        deadline = time.monotonic() + 10
        while not (children := _children(server)) and time.monotonic() < deadline:
            time.sleep(0.01)
        for child in children:
            os.kill(child, signal.SIGKILL)
        _wait_bgsave(admin, "err")
        _wait_refused(stack, "MISCONF")
        yield
    finally:
        admin.config_set("rdb-key-save-delay", 0)
        with contextlib.suppress(redis.ResponseError):  # one may still be in progress
            admin.bgsave()
        _wait_bgsave(admin, "ok")
        admin.config_set("save", before)
        admin.delete(_PROBE_KEY)


@contextlib.contextmanager
def busy_script(stack: LocalStack, seconds: int = 12) -> Iterator[None]:
    """A long script holds Redis: past busy-reply-threshold every other client gets BUSY."""
    admin = _admin(stack)
    threshold = str(admin.config_get("busy-reply-threshold")["busy-reply-threshold"])
    admin.config_set("busy-reply-threshold", 100)
    runner = threading.Thread(
        target=lambda: _admin(stack, timeout_s=seconds + 30).eval(_SPIN, 0, seconds), daemon=True
    )
    runner.start()
    try:
        _wait_refused(stack, "BUSY")
        yield
    finally:
        runner.join(seconds + 30)
        admin.config_set("busy-reply-threshold", threshold)
        admin.delete(_PROBE_KEY)


REFUSALS: dict[str, Refusal] = {
    "OOM": out_of_memory,
    "MISCONF": cannot_persist,
    "BUSY": busy_script,
}
