"""`streamrec credentials rotate`: after it, the old passwords are refused and the new ones (in
the secrets folder) log in, on Kafka and on Redis, admin included."""

from __future__ import annotations

import stat

import pytest
import redis
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from deploy.local.credentials import rotate_all, rotate_kafka, rotate_redis
from deploy.local.redis import LocalRedis
from deploy.local.redis_acl import USERS
from deploy.local.settings import LocalStackSettings
from deploy.local.stack import LocalStack
from streams.kafka.connection import KafkaConnection


def _secret(settings: LocalStackSettings, name: str) -> str:
    return (settings.secrets_dir / name).read_text().strip()


def _redis_login(settings: LocalStackSettings, user: str, password: str) -> bool:
    client = redis.Redis(host=settings.host, port=settings.redis_port, username=user,
                         password=password, socket_timeout=5)
    try:
        return bool(client.ping())
    except redis.AuthenticationError:
        return False
    finally:
        client.close()


def test_redis_passwords_rotate_on_the_running_server_and_survive_its_restart(
    own_redis: LocalRedis,
) -> None:
    s = own_redis.s
    before = {user: _secret(s, f"redis-{user}") for user in USERS}
    still_open = own_redis.admin_client()
    assert still_open.ping()

    users, servers = rotate_redis(s, USERS)

    assert set(users) == set(USERS) and servers == (f"{s.host}:{s.redis_port}",)
    for user, old in before.items():
        new = _secret(s, f"redis-{user}")
        assert new != old
        assert not _redis_login(s, user, old) and _redis_login(s, user, new)
        assert stat.S_IMODE((s.secrets_dir / f"redis-{user}").stat().st_mode) == 0o600
    # ACL LOAD logs out whoever was logged in as a reloaded user: reconnecting with the old
    # password (what a service not restarted would do) is refused.
    with pytest.raises(redis.RedisError):
        still_open.ping()
    still_open.close()
    own_redis.stop()
    own_redis.start()
    own_redis.wait_healthy(30)
    assert all(_redis_login(s, user, _secret(s, f"redis-{user}")) for user in USERS)


def test_only_the_named_credentials_rotate(own_redis: LocalRedis) -> None:
    s = own_redis.s
    before = {user: _secret(s, f"redis-{user}") for user in USERS}
    rotate_redis(s, ["monitor"])
    assert _secret(s, "redis-monitor") != before["monitor"]
    assert all(_secret(s, f"redis-{u}") == before[u] for u in USERS if u != "monitor")
    with pytest.raises(ValueError, match="no such credential"):
        rotate_all(s, only=["nobody"])


def _kafka_login(stack: LocalStack, principal: str, password: str) -> bool:
    s = stack.settings
    connection = KafkaConnection(
        bootstrap_servers=f"{s.host}:{s.kafka_port}", sasl_username=principal,
        sasl_password=password,
    )
    admin = AdminClient({**connection.client_config(), "retries": 0})
    try:
        admin.list_topics(timeout=10)
    except KafkaException:
        return False
    return True


@pytest.mark.alone  # the session broker's admin password changes under every client
def test_kafka_scram_passwords_rotate_admin_included(stack: LocalStack) -> None:
    s = stack.settings
    names = ["app", "admin"]
    before = {name: _secret(s, f"kafka-{name}") for name in names}
    assert rotate_kafka(s, names) == tuple(names)
    for name, old in before.items():
        new = _secret(s, f"kafka-{name}")
        mode = stat.S_IMODE((s.secrets_dir / f"kafka-{name}").stat().st_mode)
        assert new != old and mode == 0o600
        assert _kafka_login(stack, name, new)
        assert not _kafka_login(stack, name, old)
