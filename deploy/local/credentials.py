"""`streamrec credentials rotate`: new passwords for every credential the local stack generated.

- **Kafka**: every principal's SCRAM credential (streams/kafka/principals.py), `admin` included,
  is set on the broker as `admin` (logged in with its current password), then its file in the
  secrets folder is replaced. The broker's own credential also lives in the broker's
  configuration (its JAAS logins), so rotating it (`broker=True`) restarts the local Kafka.
- **Redis**: every ACL user's password (deploy/local/redis_acl.py), `admin` included: the ACL
  file of the single Redis and of every local cluster node is rewritten with the new hashes and
  each running server reloads it (`ACL LOAD`, as `admin` on a connection opened with the
  current password), then the files in the secrets folder are replaced.

A credential is changed on the server before its file, so a failure leaves the files naming the
passwords the servers still accept. Kafka connections already open stay logged in, Redis logs
out the users it reloads: restart the services afterwards, so that they read the new passwords
and a leaked one is of no use to anyone still connected with it.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import redis
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)

from deploy.local.kafka import LocalKafka
from deploy.local.kafka_credentials import ITERATIONS
from deploy.local.kafka_credentials import ensure_passwords as kafka_passwords
from deploy.local.process import port_open
from deploy.local.redis import write_acl
from deploy.local.redis_acl import ensure_passwords as redis_passwords
from deploy.local.settings import LocalStackSettings
from streams.kafka.principals import BROKER, PRINCIPALS

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rotation:
    kafka: tuple[str, ...] = ()
    """Kafka principals with a new password."""
    redis: tuple[str, ...] = ()
    """Redis ACL users with a new password."""
    redis_servers: tuple[str, ...] = ()
    """Redis servers that reloaded their ACL (the others read it at their next start)."""
    broker_restarted: bool = False


def new_password() -> str:
    return secrets.token_urlsafe(24)


def replace_secret(path: Path, password: str) -> None:
    """The file holds `password`, replaced whole (never a half-written file), mode 0600."""
    staging = path.with_name(f"{path.name}.new")
    staging.unlink(missing_ok=True)
    staging.touch(mode=0o600)
    staging.write_text(password + "\n")
    staging.rename(path)


def rotate_kafka(settings: LocalStackSettings, principals: Iterable[str]) -> tuple[str, ...]:
    """New SCRAM passwords for `principals` (the broker's: `rotate_broker`) on a running broker."""
    names = tuple(p for p in principals if p != BROKER)
    if not names:
        return ()
    unknown = set(names) - set(PRINCIPALS)
    if unknown:
        raise ValueError(f"no such Kafka principal: {', '.join(sorted(unknown))}")
    kafka_passwords(settings.secrets_dir)  # every file exists: admin's is read next
    passwords = {name: new_password() for name in names}
    _set_scram(LocalKafka(settings), passwords)
    for name, password in passwords.items():
        replace_secret(settings.secrets_dir / f"kafka-{name}", password)
    logger.warning("kafka credentials rotated principals=%s", ",".join(names))
    return names


def rotate_broker(settings: LocalStackSettings, timeout_s: float) -> None:
    """The broker's credential: set on the broker, then its file, then the local Kafka restarts
    with it in its configuration (it must have been started by streamrec)."""
    kafka = LocalKafka(settings)
    if kafka.state().owned_pid is None:
        raise RuntimeError("the broker credential rotates only on a Kafka `streamrec up` started")
    password = new_password()
    _set_scram(kafka, {BROKER: password})
    replace_secret(settings.secrets_dir / f"kafka-{BROKER}", password)
    kafka.stop()
    kafka.start()
    kafka.wait_healthy(timeout_s)
    logger.warning("kafka broker credential rotated; broker restarted")


def _set_scram(kafka: LocalKafka, passwords: dict[str, str], timeout_s: float = 30.0) -> None:
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, ITERATIONS)
    admin = AdminClient(kafka.admin_connection().client_config())  # the current admin password
    upserts: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion(name, info, password.encode())
        for name, password in passwords.items()
    ]
    for future in admin.alter_user_scram_credentials(upserts, request_timeout=timeout_s).values():
        future.result()


def rotate_redis(
    settings: LocalStackSettings, users: Iterable[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """New passwords for the Redis ACL `users` on the single Redis and every local cluster
    node; (users rotated, servers that reloaded their ACL)."""
    current = redis_passwords(settings.secrets_dir)
    names = tuple(users)
    unknown = set(names) - set(current)
    if unknown:
        raise ValueError(f"no such Redis user: {', '.join(sorted(unknown))}")
    if not names:
        return (), ()
    passwords = {**current, **{name: new_password() for name in names}}
    servers = _redis_servers(settings)
    running = {
        address: _admin_client(settings.host, port, current["admin"])
        for address, (port, _) in servers.items()
        if port_open(settings.host, port)
    }
    try:
        for client in running.values():
            client.ping()  # logged in with the current password before the ACL changes
        for _port, directory in servers.values():
            write_acl(directory, passwords)
        for client in running.values():
            client.acl_load()
    finally:
        for client in running.values():
            client.close()
    for name in names:
        replace_secret(settings.secrets_dir / f"redis-{name}", passwords[name])
    logger.warning("redis credentials rotated users=%s servers=%s", ",".join(names),
                   ",".join(running))
    return names, tuple(running)


def _redis_servers(settings: LocalStackSettings) -> dict[str, tuple[int, Path]]:
    """address -> (port, folder holding its users.acl) of every local Redis ever set up."""
    servers = {}
    single = settings.redis_dir
    if (single / "users.acl").exists():
        servers[f"{settings.host}:{settings.redis_port}"] = (settings.redis_port, single)
    for acl in sorted(settings.redis_cluster_dir.glob("*/users.acl")):
        port = int(acl.parent.name)
        servers[f"{settings.host}:{port}"] = (port, acl.parent)
    return servers


def _admin_client(host: str, port: int, password: str) -> redis.Redis:
    return redis.Redis(host=host, port=port, username="admin", password=password,
                       socket_timeout=5, socket_connect_timeout=5)


def rotate_all(
    settings: LocalStackSettings, only: Iterable[str] = (), broker: bool = False
) -> Rotation:
    """Every Kafka principal but the broker and every Redis user (or those named in `only`: a
    name that is both, such as `admin`, rotates both); with `broker` (or `broker` in `only`),
    the broker's too, and the local Kafka restarts."""
    chosen = set(only)
    users = list(redis_passwords(settings.secrets_dir))
    unknown = chosen - set(PRINCIPALS) - set(users)
    if unknown:
        raise ValueError(f"no such credential: {', '.join(sorted(unknown))}")
    broker = broker or BROKER in chosen
    kafka_names = [p for p in PRINCIPALS if p != BROKER and (not chosen or p in chosen)]
    redis_names = [u for u in users if not chosen or u in chosen]
    kafka = rotate_kafka(settings, kafka_names)
    redis_users, servers = rotate_redis(settings, redis_names)
    if broker:
        rotate_broker(settings, settings.start_timeout_s)
    return Rotation(kafka, redis_users, servers, broker)
