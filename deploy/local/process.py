"""Background processes owned through pid files: start detached, find, stop only our own."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceState:
    name: str
    address: str
    running: bool
    owned_pid: int | None
    detail: str = ""


def port_open(host: str, port: int, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def owned_pid(pid_file: Path, marker: str) -> int | None:
    """The pid in `pid_file` if that process is alive and is still ours (pids get reused)."""
    pid = read_pid(pid_file)
    if pid is None:
        return None
    cmdline = _cmdline(pid)
    return pid if cmdline and marker in cmdline else None


def exited(pid_file: Path) -> bool:
    """The process we started is gone. Only liveness counts here: while the JVM launcher
    re-executes itself its command line can briefly read empty, so ownership is not checked."""
    pid = read_pid(pid_file)
    return pid is not None and not _alive(pid)


def start_detached(argv: Sequence[str], log_file: Path, pid_file: Path) -> int:
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # survives the CLI and its terminal
            close_fds=True,
        )
    pid_file.write_text(f"{proc.pid}\n")
    return proc.pid


def stop_pid(pid: int, pid_file: Path, grace_s: float = 30.0) -> None:
    """SIGTERM, wait for a clean shutdown (Kafka flushes its logs), then SIGKILL."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pid_file.unlink(missing_ok=True)
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            break
        time.sleep(0.2)
    else:
        logger.warning("pid=%d ignored SIGTERM for %.0fs, killing", pid, grace_s)
        os.kill(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    # Reap it if it is our child (tests start services in-process); zombies count as dead.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    state = _proc_state(pid)
    return state not in {"", "Z"}


def _proc_state(pid: int) -> str:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[0]
    except (OSError, IndexError):
        return ""
