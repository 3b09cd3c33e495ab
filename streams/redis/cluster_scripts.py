"""The feature worker's script pipeline on Redis Cluster, through redis-py's cluster pipeline.

Every command the worker sends names keys of one hash slot (`slot`: the entities of a call share
it; each entity's keys share its hash tag), so redis-py routes each to the master of that slot,
sends each master its share in one pipeline, and returns the replies in the order given: the
same contract as `ScriptConnection`. Per master the commands keep their order, so an entity's
calls still apply in stream order.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.crc import key_slot

from streams.redis.resp import Arg


class ClusterScripts:
    def __init__(self, client: aioredis.RedisCluster) -> None:
        self._client = client

    @staticmethod
    def slot(key: str) -> int:
        """The key's hash slot: a script call's keys must share one."""
        return key_slot(key.encode())

    async def pipeline(self, slices: Iterable[Sequence[Sequence[Arg]]]) -> list[Any]:
        """Every command's reply, an error reply as its exception (not raised); the slices go
        out together, in one pipeline per master."""
        commands = list(itertools.chain.from_iterable(slices))
        if not commands:
            return []
        pipe = self._client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        return replies

    async def execute(self, *command: Arg) -> Any:
        if [str(part).upper() for part in command[:2]] == ["FUNCTION", "LOAD"]:
            # On every master; REPLACE where the caller asked for it.
            return await self._client.function_load(str(command[-1]), replace=len(command) > 3)
        return await self._client.execute_command(*command)

    async def aclose(self) -> None:
        await self._client.aclose()
