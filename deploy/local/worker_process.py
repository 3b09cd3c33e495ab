"""Feature workers as child processes, for tests, benchmarks and the demo.

Settings travel as STREAMREC_* variables, exactly as in production; the parent reads progress
from the child's /metrics endpoint.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from streams.metrics import scrape

APPLIED = "streamrec_stream_events_applied_total"
SKIPPED = "streamrec_stream_events_skipped_total"
EVENTS_IN = "streamrec_stream_events_in_total"
DEAD_LETTERED = "streamrec_stream_events_dead_lettered_total"
ASSIGNED = "streamrec_stream_assigned_partitions"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def settled(samples: Mapping[str, float]) -> float:
    """Records a worker has finished with: applied, skipped or dead-lettered."""
    dead = sum(v for k, v in samples.items() if k.startswith(DEAD_LETTERED))
    return samples.get(APPLIED, 0.0) + samples.get(SKIPPED, 0.0) + dead


class WorkerProcess:
    def __init__(self, env: Mapping[str, str], log_path: Path | None = None) -> None:
        self.port = free_port()
        self._env = {**os.environ, **env, "STREAMREC_METRICS_PORT": str(self.port)}
        self._log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        command = [sys.executable, "-m", "streams.feature_worker.worker"]
        if self._log_path is None:
            self._process = subprocess.Popen(
                command, env=self._env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            return self
        with open(self._log_path, "ab") as log:  # the child keeps its own copy of the handle
            self._process = subprocess.Popen(command, env=self._env, stdout=log, stderr=log)
        return self

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def metrics(self) -> dict[str, float]:
        """Current samples; empty while the endpoint is not up yet (or the process is gone)."""
        try:
            return scrape(self.port)
        except OSError:
            return {}

    def wait_for(self, settled_count: float, timeout_s: float) -> dict[str, float]:
        """Polls until the worker settled at least `settled_count` records; returns the samples."""
        deadline = time.monotonic() + timeout_s
        samples: dict[str, float] = {}
        while time.monotonic() < deadline:
            samples = self.metrics() or samples
            if settled(samples) >= settled_count:
                return samples
            if not self.alive():
                raise RuntimeError(
                    f"worker {self.pid} exited with {self._process and self._process.returncode}"
                )
            time.sleep(0.2)
        raise TimeoutError(f"worker settled {settled(samples):.0f} of {settled_count:.0f} records")

    def wait_assigned(self, partitions: int, timeout_s: float) -> None:
        """Polls until the worker owns exactly `partitions` partitions (a rebalance settled)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.metrics().get(ASSIGNED) == partitions:
                return
            if not self.alive():
                raise RuntimeError(f"worker {self.pid} exited")
            time.sleep(0.2)
        raise TimeoutError(f"worker does not own {partitions} partitions after {timeout_s}s")

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, nothing is committed on the way out."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        if self._process is not None:
            self._process.wait()

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """Graceful stop (SIGTERM), escalating to SIGKILL after `timeout_s`."""
        if self._process is None:
            return None
        if self.alive():
            self._process.terminate()
            try:
                self._process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self._process.returncode
