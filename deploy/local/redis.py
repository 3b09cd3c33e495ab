"""Debian's redis-server, installed when missing, with AOF (everysec) and per-service ACL users."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

import redis

from deploy.local.process import ServiceState, owned_pid, port_open, start_detached, stop_pid
from deploy.local.redis_acl import acl_file_text, ensure_passwords
from deploy.local.redis_aof import repair_aof
from deploy.local.settings import LocalStackSettings

logger = logging.getLogger(__name__)

BINARY = "redis-server"


def ensure_installed() -> str:
    path = shutil.which(BINARY) or (
        "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None
    )
    if path:
        return path
    if os.geteuid() != 0:
        raise RuntimeError(
            "redis-server is missing; install Debian's package: apt-get install redis-server"
        )
    logger.info("installing redis-server from Debian")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "redis-server"], check=True, env=env)
    return shutil.which(BINARY) or "/usr/bin/redis-server"


def write_acl_file(settings: LocalStackSettings, directory: Path) -> Path:
    """The service users (deploy/local/redis_acl.py) with this stack's passwords, mode 0600."""
    return write_acl(directory, ensure_passwords(settings.secrets_dir))


def write_acl(directory: Path, passwords: dict[str, str]) -> Path:
    """`users.acl` in `directory` for these passwords (hashed), replaced whole, mode 0600."""
    acl = directory / "users.acl"
    staging = directory / "users.acl.new"
    staging.unlink(missing_ok=True)
    staging.touch(mode=0o600)
    staging.write_text(acl_file_text(passwords))
    staging.rename(acl)
    return acl


def server_config(
    settings: LocalStackSettings, directory: Path, port: int, acl: Path
) -> list[str]:
    """redis.conf lines every local server shares, the single one and each cluster node."""
    return [
        f"bind {settings.host}",
        "protected-mode yes",
        f"port {port}",
        f"dir {directory.resolve()}",
        "daemonize no",
        f"aclfile {acl.resolve()}",
        # Durability: a crash loses at most ~1 s of writes, and the applied-offset markers live
        # in the same AOF, so a replay from Kafka repairs exactly that.
        "appendonly yes",
        "appendfsync everysec",
        # An AOF rewrite forks a child that re-writes the whole dataset, a core's work while it
        # runs, and on a 2-core host the scorer's request tail shows each one. The script's
        # effects make the AOF grow ~1.2 KB per event of live traffic, so the default 64 MB
        # threshold would rewrite every ~50 s at 1,000 events/s; at 512 MB it is every ~7
        # minutes (every ~85 s at 5,000 events/s: docs/operations.md says when to raise it).
        # The rewrite also bounds a restart: Redis loads the RDB base (fast) and replays the
        # incremental file, which a rewrite keeps under the larger of 512 MB and the base's
        # size (growth of 100% over the base), whatever the traffic.
        "auto-aof-rewrite-min-size 512mb",
        "auto-aof-rewrite-percentage 100",
        "aof-use-rdb-preamble yes",
        'save ""',
        f"maxmemory {settings.redis_maxmemory_mb}mb",
        # Features must never vanish silently: refuse writes instead of evicting.
        "maxmemory-policy noeviction",
        "loglevel notice",
    ]


class LocalRedis:
    def __init__(self, settings: LocalStackSettings) -> None:
        self.s = settings
        self.dir = settings.redis_dir
        self.pid_file = self.dir / "redis.pid"
        self.log_file = self.dir / "redis.log"

    @property
    def address(self) -> str:
        return f"{self.s.host}:{self.s.redis_port}"

    def _write_config(self) -> None:
        acl = write_acl_file(self.s, self.dir)
        lines = server_config(self.s, self.dir, self.s.redis_port, acl)
        (self.dir / "redis.conf").write_text("\n".join(lines) + "\n")

    def state(self) -> ServiceState:
        pid = owned_pid(self.pid_file, BINARY)
        running = port_open(self.s.host, self.s.redis_port)
        detail = "" if pid or not running else "answering, but not started by streamrec"
        return ServiceState("redis", self.address, running, pid, detail)

    def start(self) -> bool:
        if self.state().running:
            return False
        binary = ensure_installed()
        self.dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        repair_aof(self.dir)
        start_detached(
            [binary, str((self.dir / "redis.conf").resolve())], self.log_file, self.pid_file
        )
        return True

    def admin_client(self) -> redis.Redis:
        password = (self.s.secrets_dir / "redis-admin").read_text().strip()
        return redis.Redis(
            host=self.s.host,
            port=self.s.redis_port,
            username="admin",
            password=password,
            socket_timeout=2,
            socket_connect_timeout=2,
        )

    def wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        last_error = ""
        while time.monotonic() < deadline:
            try:
                if self.admin_client().ping():
                    return
            except (redis.RedisError, OSError) as exc:
                last_error = type(exc).__name__
            time.sleep(0.2)
        raise TimeoutError(
            f"redis not healthy after {timeout_s}s ({last_error}); see {self.log_file}"
        )

    def stop(self) -> bool:
        pid = owned_pid(self.pid_file, BINARY)
        if pid is None:
            return False
        stop_pid(pid, self.pid_file)
        return True
