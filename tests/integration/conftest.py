from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.local.redis import LocalRedis
from deploy.local.settings import LocalStackSettings
from deploy.local.worker_process import free_port


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Everything under tests/integration talks to real services.
    for item in items:
        if "/tests/integration/" in str(item.path) and not item.get_closest_marker("e2e"):
            item.add_marker(pytest.mark.integration)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[LocalRedis]:
    """A Redis of its own (the local stack's configuration and ACL, another port and directory)
    for a test that kills, restarts or re-keys it: the session's Redis is every other test's."""
    server = LocalRedis(LocalStackSettings(home=tmp_path / "own-redis", redis_port=free_port()))
    server.start()
    try:
        server.wait_healthy(30)
        yield server
    finally:
        server.stop()
