"""The worker tells a restarted Redis by its run id: the first one is remembered, another one
raises before anything is written."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streams.feature_worker.redis_epoch import RedisEpoch, RedisRestarted, parse_run_id

INFO = "# Server\r\nredis_version:7.0.15\r\nrun_id:{run_id}\r\ntcp_port:6379\r\n"


def _server(run_id: str) -> Any:
    async def execute(*command: object) -> bytes:
        assert command == ("INFO", "server")
        return INFO.format(run_id=run_id).encode()

    return execute


def test_the_run_id_is_read_off_info_server() -> None:
    assert parse_run_id(INFO.format(run_id="ab12")) == "ab12"
    with pytest.raises(ValueError):
        parse_run_id("# Server\r\nredis_version:7.0.15\r\n")


def test_reconnecting_to_the_same_process_is_no_restart_and_a_new_one_is() -> None:
    epoch = RedisEpoch()
    asyncio.run(epoch.check(_server("a" * 40)))
    asyncio.run(epoch.check(_server("a" * 40)))
    with pytest.raises(RedisRestarted):
        asyncio.run(epoch.check(_server("b" * 40)))
    assert (epoch.run_id, epoch.restarts) == ("b" * 40, 1)
    asyncio.run(epoch.check(_server("b" * 40)))  # seen once: the rewind is done by then
