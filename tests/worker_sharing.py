"""What the pytest-xdist workers of one test run share.

Services (the local Kafka/Redis stack, the Redis Cluster) are started once per run: the first
worker to lease them starts what does not answer, the last one to hand its lease back stops what
the first one started. A test marked `alone` runs with no other test beside it: every other
test holds a shared lock for its whole run (setup to teardown) and an `alone` test the exclusive
one. A turnstile in front of the lock lets a waiting `alone` test in before the next shared
holder, so it never waits for the other worker's whole queue.

`worker_order` orders the tests for xdist's worksteal scheduler, which hands each worker a
contiguous share of the list and lets a worker that runs out steal the back half of the longest
queue: the `alone` tests open the first share, so they run back to back while the other workers
have run only a few quick unit tests (nobody idles behind a long test while an `alone` test waits
at the turnstile); the `long` tests open the other shares, one worker each in turn, so they run
side by side; short tests fill every share's end, where stealing balances the last minutes.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
QUICK_OPENERS = 10
"""Quick tests a share begins with before its `long` ones: by the time a worker reaches them,
the first share's `alone` test is at the turnstile."""


@contextmanager
def _flocked(path: Path, mode: int) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def leased(
    directory: Path, name: str, start: Callable[[], list[str]], stop: Callable[[list[str]], None]
) -> Iterator[None]:
    """`start` runs under the lease's lock in every worker (it must start only what does not
    answer, and return what it started); the last worker to leave calls `stop` with what the
    first one started."""
    state, lock = directory / f"{name}.json", directory / f"{name}.lock"
    with _flocked(lock, fcntl.LOCK_EX):
        workers, started = json.loads(state.read_text()) if state.exists() else (0, [])
        now = start()
        state.write_text(json.dumps([workers + 1, started or now]))
    try:
        yield
    finally:
        with _flocked(lock, fcntl.LOCK_EX):
            workers, started = json.loads(state.read_text())
            if workers > 1:
                state.write_text(json.dumps([workers - 1, started]))
            else:
                state.unlink()
                stop(started)


def abandoned(directory: Path, name: str) -> list[str]:
    """What a run started and no worker stopped (a worker died holding its lease), for the
    controller to stop once every worker is gone."""
    state = directory / f"{name}.json"
    if not state.exists():
        return []
    _, started = json.loads(state.read_text())
    return list(started)


@contextmanager
def running(directory: Path, alone: bool) -> Iterator[None]:
    """Holds the run's test lock: exclusive for an `alone` test, shared for any other."""
    directory.mkdir(parents=True, exist_ok=True)
    with (
        (directory / "turnstile.lock").open("a") as gate,
        (directory / "tests.lock").open("a") as lock,
    ):
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def worker_order(
    tests: Sequence[T], workers: int, alone: Callable[[T], bool], long: Callable[[T], bool],
    quick: Callable[[T], bool],
) -> list[T]:
    """`tests` reordered so that xdist's worksteal shares (the list cut into `workers`
    contiguous parts, sized as its scheduler sizes them) begin as the module docstring says."""
    solo = [t for t in tests if alone(t)]
    slow = [t for t in tests if long(t) and not alone(t)]
    rest = [t for t in tests if not alone(t) and not long(t)]
    if workers < 2:
        return solo + slow + rest
    openers = [t for t in rest if quick(t)][: QUICK_OPENERS * (workers - 1)]
    opening = set(openers)
    fillers = [t for t in rest if t not in opening]
    heads = [solo] + [
        openers[i::workers - 1] + slow[i::workers - 1] for i in range(workers - 1)
    ]
    order: list[T] = []
    remaining = len(tests)
    for worker, head in enumerate(heads):
        size = remaining // (workers - worker)
        remaining -= size
        take = max(0, size - len(head))
        order += head + fillers[:take]
        fillers = fillers[take:]
    return order + fillers
