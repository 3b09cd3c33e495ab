"""How a service reaches Redis; embedded in each service's settings as `redis`.

Each service logs in as its own ACL user (see deploy/redis). Passwords come from the settings or,
for the local stack, from the secrets folder that `streamrec up` fills (never from the repo).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redis
import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict, Field, SecretStr

LOCAL_SECRETS_DIR = Path(".streamrec/secrets")


class RedisConnection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(6379, ge=1, le=65535)
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

    def client(self) -> redis.Redis:
        return redis.Redis(**self._options())

    def async_client(self) -> aioredis.Redis:
        """The same connection for asyncio services (never blocks the event loop)."""
        return aioredis.Redis(**self._options())
