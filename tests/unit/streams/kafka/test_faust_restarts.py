"""`run_until` supervises its app: one that crashes is replaced, one whose stop fails or hangs
too."""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

import faust
import pytest

from streams.kafka import faust_app
from streams.kafka.connection import KafkaConnection


class _App:
    """What `run_until` uses of a faust app; crashes on start when told to."""

    def __init__(self, crash: BaseException | None, stop_fails: bool) -> None:
        self.crash_reason: BaseException | None = None
        self._crash, self._stop_fails = crash, stop_fails
        self.stopped = False

    @property
    def should_stop(self) -> bool:
        return self.crash_reason is not None

    @property
    def crashed(self) -> bool:
        return self.crash_reason is not None

    async def start(self) -> None:
        if self._crash is not None:
            await self.crash(self._crash)

    async def crash(self, reason: BaseException) -> None:
        self.crash_reason = reason

    async def stop(self) -> None:
        self.stopped = True
        if self._stop_fails:
            raise RuntimeError("Event loop is closed")


def test_a_crashed_app_is_replaced_even_when_its_stop_fails_and_the_last_one_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(faust_app, "_RESTART_AFTER_S", 0.01)
    stop = threading.Event()
    plan = [(ConnectionError("broker away"), True), (KeyError("k"), False), (None, False)]
    apps: list[_App] = []
    restarts: list[str] = []

    def build() -> faust.App:
        app = _App(*plan[len(apps)])
        apps.append(app)
        if len(apps) == len(plan):
            stop.set()
        return cast(faust.App, app)

    faust_app.run_until(build, stop, poll_s=0.01, on_restart=restarts.append)
    assert restarts == ["ConnectionError", "KeyError"]
    assert len(apps) == 3 and all(app.stopped for app in apps)


async def _never_returns() -> None:
    """faust's stop of a crashed app can wait forever on a commit's producer flush."""
    await asyncio.Event().wait()


async def _cancelled_under_it() -> None:
    """faust's consumer thread can stop before the app's last commit, which it then cancels."""
    raise asyncio.CancelledError


@pytest.mark.parametrize("crashed_stop", [_never_returns, _cancelled_under_it])
def test_a_crashed_app_whose_stop_never_ends_well_is_abandoned_and_replaced(
    monkeypatch: pytest.MonkeyPatch, crashed_stop: Callable[[], Awaitable[None]],
) -> None:
    monkeypatch.setattr(faust_app, "_RESTART_AFTER_S", 0.01)
    monkeypatch.setattr(faust_app, "_STOP_AT_MOST_S", 0.05)
    stop = threading.Event()
    restarts: list[str] = []

    class _StopFails(_App):
        async def stop(self) -> None:
            self.stopped = True
            if self._crash is not None:
                await crashed_stop()

    def build() -> faust.App:
        if restarts:
            stop.set()
            return cast(faust.App, _StopFails(None, False))
        return cast(faust.App, _StopFails(ConnectionError("broker away"), False))

    done = threading.Thread(
        target=faust_app.run_until, args=(build, stop, 0.01, restarts.append), daemon=True
    )
    done.start()
    done.join(timeout=10)
    assert not done.is_alive() and restarts == ["ConnectionError"]


def test_an_app_that_fails_to_start_counts_as_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(faust_app, "_RESTART_AFTER_S", 0.01)
    stop = threading.Event()
    restarts: list[str] = []

    class _Refused(_App):
        async def start(self) -> None:
            raise PermissionError("refused")

    def build() -> faust.App:
        if restarts:
            stop.set()
        return cast(faust.App, _Refused(None, False))

    faust_app.run_until(build, stop, poll_s=0.01, on_restart=restarts.append)
    assert restarts == ["PermissionError"]


def test_a_stream_app_keeps_its_data_folder_out_of_the_working_folder_and_removes_it() -> None:
    connection = KafkaConnection(security_protocol="PLAINTEXT")
    app = faust_app.stream_app(connection, "monitor-test")
    datadir = Path(app.conf.datadir)
    assert datadir.is_dir() and datadir.is_relative_to(tempfile.gettempdir())
    asyncio.run(app.stop())
    assert not datadir.exists()
