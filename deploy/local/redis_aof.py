"""Repairs a Redis append-only file cut inside a transaction before the server loads it.

A machine that crashes between `appendfsync everysec` fsyncs can leave the AOF cut anywhere,
also inside the MULTI/EXEC that wraps one script call's effects. Redis 7.0 loads such a file
with `aof-load-truncated yes` by cutting it after the last whole command, which can leave a
MULTI and some of its commands at the end: nothing of that transaction is applied on load, but
the next writes are appended behind it, and the next load queues the orphaned commands into the
following EXEC. An entity's increments and sequence pushes would then be applied twice, where
its applied-offset marker (written whole by the same transaction) says once.

`redis-check-aof --fix` (Debian's redis-tools, beside redis-server) cuts at the last whole
transaction instead, so every local server start runs it first: on a file that is whole it
only reads it.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

logger = logging.getLogger(__name__)

CHECKER = "redis-check-aof"
MANIFEST = Path("appendonlydir") / "appendonly.aof.manifest"


def repair_aof(directory: Path) -> None:
    """Cuts the AOF in `directory` back to its last whole transaction (logged when it does).

    Raises RuntimeError when the file is damaged beyond a cut tail (Redis would refuse it too).
    """
    manifest = directory / MANIFEST
    if not manifest.exists():
        return
    checker = shutil.which(CHECKER) or f"/usr/bin/{CHECKER}"
    before = _sizes(manifest.parent)
    # --fix asks before cutting; the answer comes on stdin.
    result = subprocess.run(
        [checker, "--fix", str(manifest)], input="y\n", capture_output=True, text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"{CHECKER} could not repair {manifest}: {result.stdout[-500:]}")
    if _sizes(manifest.parent) != before:
        logger.warning("aof cut back to its last whole transaction dir=%s", directory)


def _sizes(folder: Path) -> dict[str, int]:
    return {path.name: path.stat().st_size for path in folder.iterdir() if path.is_file()}
