"""A local Redis Cluster of `redis_cluster` masters, no replicas (`STREAMREC_LOCAL__REDIS_CLUSTER`).

Each node is Debian's redis-server with the single Redis's configuration (same ACL users and
passwords, AOF everysec, noeviction; deploy/local/redis.py) plus `cluster-enabled yes`, in its own
folder `<home>/redis-cluster/<port>/`. The first `up` joins fresh nodes with `redis-cli --cluster
create` (the 16384 slots split evenly); later ones restart the nodes from their `nodes.conf` and
AOF, and they find each other again; more nodes than before join the cluster as masters and the
slots are rebalanced. `down` stops only the nodes streamrec started.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from pathlib import Path

import redis

from deploy.local.process import ServiceState, owned_pid, port_open, start_detached, stop_pid
from deploy.local.redis import BINARY, ensure_installed, server_config, write_acl_file
from deploy.local.redis_aof import repair_aof
from deploy.local.settings import LocalStackSettings
from streams.redis.connection import RedisConnection

logger = logging.getLogger(__name__)

NODE_TIMEOUT_MS = 5000
"""How long a node may not answer before the others mark it failing (cluster-node-timeout)."""


class LocalRedisCluster:
    def __init__(self, settings: LocalStackSettings) -> None:
        self.s = settings
        self.ports = settings.redis_cluster_ports

    @property
    def address(self) -> str:
        return ",".join(f"{self.s.host}:{port}" for port in self.ports)

    def node_dir(self, port: int) -> Path:
        return self.s.redis_cluster_dir / str(port)

    def _pid_file(self, port: int) -> Path:
        return self.node_dir(port) / "redis.pid"

    def _log_file(self, port: int) -> Path:
        return self.node_dir(port) / "redis.log"

    def _write_config(self, port: int) -> Path:
        directory = self.node_dir(port)
        directory.mkdir(parents=True, exist_ok=True)
        acl = write_acl_file(self.s, directory)
        lines = [
            *server_config(self.s, directory, port, acl),
            "cluster-enabled yes",
            "cluster-config-file nodes.conf",
            f"cluster-node-timeout {NODE_TIMEOUT_MS}",
            # A local cluster has no replicas: a down master must not stop reads of the others'
            # slots (a production cluster keeps the default and a replica per master).
            "cluster-require-full-coverage no",
        ]
        conf = directory / "redis.conf"
        conf.write_text("\n".join(lines) + "\n")
        return conf

    def state(self) -> ServiceState:
        pids = [owned_pid(self._pid_file(port), BINARY) for port in self.ports]
        answering = [port_open(self.s.host, port) for port in self.ports]
        running = bool(self.ports) and all(answering)
        owned = [pid for pid in pids if pid is not None]
        detail = f"{sum(answering)}/{len(self.ports)} nodes answer"
        if running and len(owned) < len(self.ports):
            detail += ", not all started by streamrec"
        return ServiceState("redis-cluster", self.address, running, owned[0] if owned else None,
                            detail)

    def start(self) -> bool:
        """Start the nodes that do not answer; True when any was started."""
        binary = ensure_installed() if self.ports else BINARY
        started = False
        for port in self.ports:
            if port_open(self.s.host, port):
                continue
            conf = self._write_config(port)
            repair_aof(conf.parent)
            start_detached([binary, str(conf.resolve())], self._log_file(port),
                           self._pid_file(port))
            started = True
        return started

    def connection(self, username: str = "admin") -> RedisConnection:
        """How a service reaches this cluster as `username` (its first node; the client finds
        the others)."""
        return RedisConnection(
            host=self.s.host,
            port=self.ports[0],
            cluster=True,
            username=username,
            secrets_dir=self.s.secrets_dir,
            socket_timeout_s=5.0,
        )

    def _node_client(self, port: int) -> redis.Redis:
        """One node on its own (a cluster client needs a formed cluster)."""
        password = (self.s.secrets_dir / "redis-admin").read_text().strip()
        return redis.Redis(host=self.s.host, port=port, username="admin", password=password,
                           socket_timeout=2, socket_connect_timeout=2)

    def _cluster_info(self, port: int) -> dict[str, str]:
        info = self._node_client(port).cluster("info")  # redis-py parses it into a dict
        return {str(key): str(value) for key, value in info.items()}

    def _wait_nodes(self, deadline: float) -> None:
        last_error = ""
        for port in self.ports:
            while True:
                try:
                    if self._node_client(port).ping():
                        break
                except (redis.RedisError, OSError) as exc:
                    last_error = type(exc).__name__
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"redis cluster node {port} not answering ({last_error}); "
                        f"see {self._log_file(port)}"
                    )
                time.sleep(0.2)

    def _redis_cli_run(self, *args: str) -> subprocess.CompletedProcess[str]:
        password = (self.s.secrets_dir / "redis-admin").read_text().strip()
        # The password goes through the environment, never the command line (`ps` shows that).
        env = {**os.environ, "REDISCLI_AUTH": password}
        return subprocess.run(
            ["redis-cli", "--user", "admin", "--cluster", *args],
            env=env, capture_output=True, text=True, timeout=600, check=False,
        )

    def _redis_cli(self, *args: str) -> None:
        result = self._redis_cli_run(*args)
        if result.returncode != 0:
            raise RuntimeError(
                f"redis-cli --cluster {args[0]} failed (exit {result.returncode}): "
                f"{result.stdout[-800:]}{result.stderr[-800:]}"
            )

    def _create(self) -> None:
        """Joins fresh nodes into one cluster, slots split evenly, no replicas."""
        nodes = [f"{self.s.host}:{port}" for port in self.ports]
        logger.info("creating redis cluster nodes=%s", ",".join(nodes))
        self._redis_cli("create", *nodes, "--cluster-replicas", "0", "--cluster-yes")

    def _grow(self, fresh: list[int], member: int) -> None:
        """Adds fresh nodes (the setting grew) as masters and moves slots onto them, keys
        included (MIGRATE, one slot at a time; clients follow the MOVED/ASK replies)."""
        first = f"{self.s.host}:{member}"
        for port in fresh:
            logger.info("adding redis cluster node port=%d", port)
            self._redis_cli("add-node", f"{self.s.host}:{port}", first)
        self._wait_agreement(first, time.monotonic() + 60)
        self._redis_cli("rebalance", first, "--cluster-use-empty-masters")

    def _wait_agreement(self, member: str, deadline: float) -> None:
        """Waits until `redis-cli --cluster check` passes: every node says `ok`, knows every
        node and sees the same slot owners. Gossip after `add-node` takes a moment, and
        `rebalance` refuses to move slots while the nodes' views differ."""
        self._wait_state(deadline)
        while True:
            result = self._redis_cli_run("check", member)
            if result.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"redis cluster nodes disagree on their configuration: {result.stdout[-800:]}"
                )
            time.sleep(0.2)

    def wait_healthy(self, timeout_s: float) -> None:
        """Every node answers and reports `cluster_state:ok`. Fresh nodes are joined first: all
        of them into a new cluster when no slot is assigned yet, else (the setting grew) into
        the existing one, which then rebalances its slots over every master."""
        if not self.ports:
            return
        deadline = time.monotonic() + timeout_s
        self._wait_nodes(deadline)
        infos = {port: self._cluster_info(port) for port in self.ports}
        if all(info.get("cluster_slots_assigned") == "0" for info in infos.values()):
            self._create()
        else:
            fresh = [p for p, info in infos.items() if info.get("cluster_known_nodes") == "1"]
            if fresh:
                self._grow(fresh, next(p for p in self.ports if p not in fresh))
        self._wait_state(deadline)

    def _wait_state(self, deadline: float) -> None:
        """Every node says `ok` and knows every node."""
        states: list[str] = []
        known = str(len(self.ports))
        while time.monotonic() < deadline:
            infos = [self._cluster_info(port) for port in self.ports]
            states = [info.get("cluster_state", "") for info in infos]
            if all(i.get("cluster_state") == "ok" and i.get("cluster_known_nodes") == known
                   for i in infos):
                return
            time.sleep(0.2)
        raise TimeoutError(
            f"redis cluster not ok in time (states {states}); see "
            f"{self.s.redis_cluster_dir}/<port>/redis.log"
        )

    def stop(self) -> bool:
        """Stops every node streamrec started under its folder, listed in the settings or not
        (a `down` without STREAMREC_LOCAL__REDIS_CLUSTER, or after lowering it, stops them too)."""
        stopped = False
        for pid_file in sorted(self.s.redis_cluster_dir.glob("*/redis.pid")):
            pid = owned_pid(pid_file, BINARY)
            if pid is not None:
                stop_pid(pid, pid_file)
                stopped = True
        return stopped
