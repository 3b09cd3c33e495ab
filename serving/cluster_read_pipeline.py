"""The scorer's per-batch round trip on a Redis Cluster: one lean pipeline per master.

A batch's commands each read one key (its first argument), and the keys of one batch live on
every master. redis-py's cluster pipeline cost the serving thread 390 us of CPU for a batch of one
request and 8.6 ms for 64 on a 2-core VM (per command: key extraction, a slot lookup, command
objects), against 82 us and 1.3 ms for the single-Redis lean pipeline. Here commands are grouped
by the master of their key's slot, sent to every master before any reply is read (the masters
answer in parallel), and the replies put back in the batch's order: 142 us and 2.4 ms.

The slot map is redis-py's (`RedisCluster.nodes_manager`, filled from CLUSTER SLOTS). When slots
move (resharding, failover) a node answers MOVED or ASK: that batch is read again through
redis-py's cluster pipeline, which follows the redirects and updates the map, and the next batch
uses the lean path again. A connection failure closes every node's connection (replies still
unread on another must not answer the next batch), raises redis.ConnectionError as the
single-Redis pipeline does, and has the slot map read again before the next batch.

Not thread-safe: only the serving thread uses it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import hiredis
import redis
from redis.crc import key_slot
from redis.exceptions import AskError, MovedError, TryAgainError

from serving.read_pipeline import ReadPipeline, raise_for_errors
from streams.redis.resp import Arg, reply_error

logger = logging.getLogger(__name__)

REDIRECTS = (MovedError, AskError, TryAgainError)
"""Replies that say a slot is moving: redis-py's pipeline follows them."""


def _encoded(key: Arg) -> bytes:
    return key if isinstance(key, bytes) else str(key).encode()


class ClusterReadPipeline:
    def __init__(
        self,
        client: redis.RedisCluster,
        username: str | None,
        password: str | None,
        timeout_s: float,
        spin_s: float,
    ) -> None:
        self._client = client
        self._login = (username, password)
        self._timeout_s = timeout_s
        self._spin_s = spin_s
        self._nodes: dict[str, ReadPipeline] = {}
        self._map_stale = False
        """A node failed: ask the cluster for its slot map again (a failover may have moved
        its slots to another node) before the next batch."""

    def execute(self, commands: Sequence[Sequence[Arg]]) -> list[Any]:
        """The replies, in order; raises redis.ResponseError for the first error reply."""
        if self._map_stale:
            self._client.nodes_manager.initialize()
            self._map_stale = False
        groups = self._by_node(commands)
        replies: list[Any] = [None] * len(commands)
        try:
            for name, indices in groups.items():
                self._nodes[name].send([commands[i] for i in indices])
            for name, indices in groups.items():
                for i, reply in zip(indices, self._nodes[name].receive(len(indices)), strict=True):
                    replies[i] = reply
        except redis.ConnectionError:
            self.close()
            self._map_stale = True
            raise
        redirected = [r for r in replies if isinstance(r, hiredis.ReplyError)
                      and isinstance(reply_error(str(r)), REDIRECTS)]
        if redirected:
            logger.info("slots moved, batch read through redis-py reply=%s",
                        str(redirected[0]).split(" ")[0])
            return self._through_redis_py(commands)
        return raise_for_errors(replies)

    def close(self) -> None:
        for node in self._nodes.values():
            node.close()

    def _by_node(self, commands: Sequence[Sequence[Arg]]) -> dict[str, list[int]]:
        groups: dict[str, list[int]] = {}
        slots = self._client.nodes_manager
        for i, command in enumerate(commands):
            node = slots.get_node_from_slot(key_slot(_encoded(command[1])))
            if node.name not in self._nodes:
                self._nodes[node.name] = ReadPipeline(
                    node.host, node.port, *self._login, self._timeout_s, self._spin_s
                )
            groups.setdefault(node.name, []).append(i)
        return groups

    def _through_redis_py(self, commands: Sequence[Sequence[Arg]]) -> list[Any]:
        pipe = self._client.pipeline(transaction=False)  # type: ignore[no-untyped-call]
        for args in commands:
            pipe.execute_command(*args)
        replies: list[Any] = pipe.execute()
        return replies
