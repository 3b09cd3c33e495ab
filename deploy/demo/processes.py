"""The services as child processes: started with STREAMREC_* variables, logs to files, metrics
read from each one's /metrics on 127.0.0.1, always stopped (SIGTERM, then SIGKILL)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from deploy.local.worker_process import free_port
from streams.metrics import scrape

logger = logging.getLogger(__name__)

# Each service runs as `python -m cli <command>`: the command line users run, with this
# interpreter (the console script may not be on PATH).
COMMANDS: dict[str, list[str]] = {
    name: [sys.executable, "-m", "cli", *args]
    for name, args in {
        "worker": ["stream"],
        "trainer": ["train", "--idle-exit-s", "0"],
        "scorer": ["serve"],
        "monitor": ["monitor"],
    }.items()
}


@dataclass
class ServiceProcess:
    name: str
    command: list[str]
    env: dict[str, str]
    log_path: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, **self.env, "STREAMREC_METRICS_PORT": str(self.port)}
        with open(self.log_path, "ab") as log:  # the child keeps its own handle
            self.process = subprocess.Popen(
                self.command, env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,  # Ctrl-C reaches only us
            )
        logger.info("started service=%s pid=%d port=%d", self.name, self.process.pid, self.port)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def metrics(self) -> dict[str, float]:
        """Current samples; empty while the endpoint is not up (or the process is gone)."""
        if not self.alive():
            return {}
        try:
            return scrape(self.port, timeout_s=1.0)
        except OSError:
            return {}

    def stop(self, timeout_s: float = 30.0) -> int | None:
        if self.process is None:
            return None
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                logger.warning("service=%s ignored SIGTERM; killing", self.name)
                self.process.kill()
                self.process.wait()
        logger.info("stopped service=%s rc=%s", self.name, self.process.returncode)
        return self.process.returncode


class Services:
    """Every service of one run; `stop_all` is safe to call at any point, more than once."""

    def __init__(self, env: Mapping[str, str], logs: Path) -> None:
        self._env = dict(env)
        self._logs = logs
        self.by_name: dict[str, ServiceProcess] = {}

    def start(self, name: str, extra_env: Mapping[str, str] | None = None) -> ServiceProcess:
        service = ServiceProcess(
            name, COMMANDS[name], {**self._env, **(extra_env or {})}, self._logs / f"{name}.log"
        )
        self.by_name[name] = service
        service.start()
        return service

    def metrics(self) -> dict[str, dict[str, float]]:
        return {name: s.metrics() for name, s in self.by_name.items()}

    def dead(self) -> list[str]:
        return [name for name, s in self.by_name.items() if not s.alive()]

    def stop_all(self) -> dict[str, int | None]:
        # Reverse start order: producers of work stop after their consumers.
        return {name: self.by_name[name].stop() for name in reversed(list(self.by_name))}
