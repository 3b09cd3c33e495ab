"""How a service reaches Redis; embedded in each service's settings as `redis`.

Each service logs in as its own ACL user (see deploy/redis). Passwords come from the settings or,
for the local stack, from the secrets folder that `streamrec up` fills (never from the repo).

The one place clients are built: `client()` and `async_client()` return redis-py's `Redis`, or
its `RedisCluster` when `cluster` is set (STREAMREC_REDIS__CLUSTER=true). A cluster client learns
every node from `host:port` (any one of them) and sends each command to the master of its key's
slot, so callers keep every multi-key command and transaction within one slot; non-transactional
pipelines may span slots (redis-py splits them per node and keeps the replies' order).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redis
import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict, Field, SecretStr

LOCAL_SECRETS_DIR = Path(".streamrec/secrets")

SyncClient = redis.Redis | redis.RedisCluster
"""What `RedisConnection.client()` returns; both have the commands and pipelines services use."""
AsyncClient = aioredis.Redis | aioredis.RedisCluster


class RedisConnection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(6379, ge=1, le=65535)
    cluster: bool = Field(
        False, description="host:port is a node of a Redis Cluster: clients discover the others "
        "and route each key to its slot's master (redis-py's RedisCluster).",
    )
    username: str = Field(
        "streams", description="ACL user: streams, scorer, trainer, monitor, admin."
    )
    password: SecretStr | None = Field(
        None, description="Falls back to <secrets_dir>/redis-<username>."
    )
    secrets_dir: Path = LOCAL_SECRETS_DIR
    key_prefix: str = Field(
        "sr:",
        pattern=r"^[a-zA-Z0-9._:-]{1,32}$",
        description="Namespace of every key this service reads or writes (isolates tests).",
    )
    socket_timeout_s: float = Field(5.0, gt=0, le=120)

    def resolved_password(self) -> str | None:
        if self.password is not None:
            return self.password.get_secret_value()
        path = self.secrets_dir / f"redis-{self.username}"
        return path.read_text().strip() if path.exists() else None

    def _options(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "port": self.port,
            "username": self.username,
            "password": self.resolved_password(),
            "socket_timeout": self.socket_timeout_s,
            "socket_connect_timeout": self.socket_timeout_s,
            "health_check_interval": 30,
        }

    def client(self) -> SyncClient:
        if self.cluster:
            return redis.RedisCluster(**self._options())
        return redis.Redis(**self._options())

    def async_client(self) -> AsyncClient:
        """The same connection for asyncio services (never blocks the event loop)."""
        if self.cluster:
            return aioredis.RedisCluster(**self._options())
        return aioredis.Redis(**self._options())
