"""Shared fixtures. Services start once per session; each test gets isolated topics and keys.

Unit tests never touch these fixtures (they need no services). Integration tests use the real
local Kafka and Redis: `stack` starts them if nothing answers and stops only what it started.
Tests marked `cluster` use `redis_cluster`, a local 3-master Redis Cluster started the same way
(ports from STREAMREC_LOCAL__REDIS_CLUSTER_PORT), with no Kafka.

Under pytest-xdist (`make test` runs three workers) the services are still started once per run
and stopped after the last worker's last test (tests/worker_sharing.py), and a test marked
`alone` runs with no other test beside it.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
import redis

from deploy.local.redis_cluster import LocalRedisCluster
from deploy.local.settings import LocalStackSettings
from deploy.local.stack import LocalStack
from streams.kafka.acls import grant_acls
from streams.kafka.admin import create_topics
from streams.kafka.connection import KafkaConnection
from streams.kafka.principals import ADMIN
from streams.redis.connection import RedisConnection
from tests.worker_sharing import abandoned, leased, running, worker_order


def _controller(config: pytest.Config) -> bool:
    """The process that hands out tests to xdist workers (it runs none itself)."""
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", 0))


def _run_directory(config: pytest.Config) -> Path | None:
    """Where the workers of one xdist run keep their locks; None outside xdist."""
    workerinput = getattr(config, "workerinput", None)
    run_id = workerinput["testrunuid"] if workerinput else None
    if _controller(config):
        run_id = config.option.testrunuid
    return Path(tempfile.gettempdir()) / f"streamrec-tests-{run_id}" if run_id else None


def pytest_configure(config: pytest.Config) -> None:
    # The controller names the run before it starts the workers: xdist hands them this name.
    if _controller(config) and config.option.testrunuid is None:
        config.option.testrunuid = uuid.uuid4().hex
    if hasattr(config, "workerinput"):
        # Two workers share the cores: with a torch thread pool each as wide as the machine,
        # their spinning threads take turns on the same cores and every tensor op waits.
        import torch

        torch.set_num_threads(1)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _controller(config) and (directory := _run_directory(config)):
        if started := abandoned(directory, "stack"):
            LocalStack(LocalStackSettings()).down(only=tuple(started))
        if abandoned(directory, "redis-cluster"):
            LocalRedisCluster(LocalStackSettings(redis_cluster=3)).stop()
        shutil.rmtree(directory, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The `alone` tests first, the `long` ones spread over the other workers (see
    tests/worker_sharing.py `worker_order`)."""
    workerinput = getattr(config, "workerinput", None)
    workers = int(workerinput["workercount"]) if workerinput else 1
    items[:] = worker_order(
        items, workers,
        alone=lambda item: item.get_closest_marker("alone") is not None,
        long=lambda item: item.get_closest_marker("long") is not None,
        quick=lambda item: item.nodeid.startswith("tests/unit/"),
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    directory = _run_directory(item.config)
    if directory is None:
        return (yield)
    with running(directory, alone=item.get_closest_marker("alone") is not None):
        return (yield)


@pytest.fixture(scope="session")
def run_directory(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shared by every worker of this run (a directory of this process's own outside xdist)."""
    return _run_directory(request.config) or tmp_path_factory.mktemp("run")


@pytest.fixture(scope="session")
def stack(run_directory: Path) -> Iterator[LocalStack]:
    """The local stack (ports from STREAMREC_LOCAL__*). Its addresses are exported as the
    services' own STREAMREC_* variables, so in-process settings and spawned workers agree."""
    settings = LocalStackSettings()
    # The first worker starts the broker while the other imports and collects every test: on a
    # busy 2-core machine the JVM can take longer than an operator's `up` waits.
    timeout_s = max(settings.start_timeout_s, 300.0)
    local = LocalStack(settings.model_copy(update={"start_timeout_s": timeout_s}))
    s = local.settings

    def stop(started: list[str]) -> None:
        local.down(only=tuple(started))

    with (
        leased(run_directory, "stack", lambda: list(local.up().started), stop),
        pytest.MonkeyPatch.context() as env,
    ):
        env.setenv("STREAMREC_KAFKA__BOOTSTRAP_SERVERS", f"{s.host}:{s.kafka_port}")
        env.setenv("STREAMREC_KAFKA__SECRETS_DIR", str(s.secrets_dir.resolve()))
        env.setenv("STREAMREC_REDIS__HOST", s.host)
        env.setenv("STREAMREC_REDIS__PORT", str(s.redis_port))
        env.setenv("STREAMREC_REDIS__SECRETS_DIR", str(s.secrets_dir.resolve()))
        yield local


@pytest.fixture
def kafka(stack: LocalStack) -> KafkaConnection:
    """A connection whose catalog topics exist under a prefix of this test's own, each
    principal granted its ACLs on them. It logs in as `admin` (the test's own producers and
    readers); a service under test gets `kafka.as_principal(<its principal>)`."""
    s = stack.settings
    connection = KafkaConnection(
        bootstrap_servers=f"{s.host}:{s.kafka_port}",
        topic_prefix=f"t{uuid.uuid4().hex[:10]}.",
        secrets_dir=s.secrets_dir.resolve(),
        sasl_username=ADMIN,
    )
    create_topics(connection)
    grant_acls(connection)
    return connection


@pytest.fixture
def redis_admin(stack: LocalStack) -> redis.Redis:
    return stack.redis.admin_client()


@pytest.fixture
def redis_prefix(redis_admin: redis.Redis) -> Iterator[str]:
    prefix = f"test:{uuid.uuid4().hex[:10]}:"
    yield prefix
    for key in redis_admin.scan_iter(match=f"{prefix}*", count=1000):
        redis_admin.delete(key)


@pytest.fixture
def redis_connection(stack: LocalStack, redis_prefix: str) -> RedisConnection:
    """The feature writer's ACL user, confined to this test's key prefix."""
    return RedisConnection(
        host=stack.settings.host,
        port=stack.settings.redis_port,
        username="streams",
        secrets_dir=stack.settings.secrets_dir,
        key_prefix=redis_prefix,
    )


@pytest.fixture
def scorer_redis_connection(redis_connection: RedisConnection) -> RedisConnection:
    """The scorer's read-only ACL user on the same keys."""
    return redis_connection.model_copy(update={"username": "scorer"})


@pytest.fixture(scope="session")
def redis_cluster(run_directory: Path) -> Iterator[LocalRedisCluster]:
    """3 masters through the code `streamrec up` runs (deploy/local/redis_cluster.py); a cluster
    already answering on those ports is used as it is, and only nodes this run started are
    stopped."""
    cluster = LocalRedisCluster(LocalStackSettings(redis_cluster=3))

    def start() -> list[str]:
        started = cluster.start()
        try:
            cluster.wait_healthy(cluster.s.start_timeout_s)
        except BaseException:
            if started:
                cluster.stop()
            raise
        return ["redis-cluster"] if started else []

    def stop(started: list[str]) -> None:
        if started:
            cluster.stop()

    with leased(run_directory, "redis-cluster", start, stop):
        yield cluster


@pytest.fixture
def cluster_prefix(redis_cluster: LocalRedisCluster) -> Iterator[str]:
    prefix = f"test:{uuid.uuid4().hex[:10]}:"
    yield prefix
    admin = redis_cluster.connection("admin").client()
    for key in admin.scan_iter(match=f"{prefix}*", count=1000):  # every master's keys
        admin.delete(key)


@pytest.fixture
def cluster_connection(redis_cluster: LocalRedisCluster, cluster_prefix: str) -> RedisConnection:
    """The feature writer's ACL user on the cluster, confined to this test's key prefix."""
    return redis_cluster.connection("streams").model_copy(update={"key_prefix": cluster_prefix})
