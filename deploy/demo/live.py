"""Runs the scenario under a rich.Live dashboard, turns SIGTERM into an orderly stop, writes
the report and optionally saves dashboard screens as SVG (for the README)."""

from __future__ import annotations

import io
import logging
import signal
from pathlib import Path
from types import FrameType

from rich.console import Console
from rich.live import Live
from rich.logging import RichHandler

from deploy.demo import report, scenario
from deploy.demo.dashboard import render
from deploy.demo.dataset import DemoDataset
from deploy.demo.run_state import RunState
from deploy.demo.settings import DemoSettings

logger = logging.getLogger(__name__)


class ScreenSaver:
    """Saves the dashboard once when the first KPI alert is seen and once at the end."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._alerted = False

    def maybe(self, state: RunState) -> None:
        alerts = state.observer.snapshot().alerts if state.observer else []
        kpi_alert = any(a.detector.startswith("kpi.") for a in alerts)
        if self.folder is not None and kpi_alert and not self._alerted:
            self._alerted = True
            self.save(state, "dashboard-kpi-alert.svg")

    def save(self, state: RunState, name: str) -> Path | None:
        if self.folder is None:
            return None
        self.folder.mkdir(parents=True, exist_ok=True)
        console = Console(record=True, width=110, file=io.StringIO(), force_terminal=True)
        console.print(render(state))
        path = self.folder / name
        console.save_svg(str(path), title="streamrec demo")
        return path


def terminate(signum: int, _frame: FrameType | None) -> None:
    # KeyboardInterrupt unwinds through every finally block: children and the stack stop.
    raise KeyboardInterrupt(f"signal {signum}")


def run_demo(
    settings: DemoSettings, dataset: DemoDataset, screens: Path | None = None
) -> Path:
    console = Console()
    # RichHandler prints the time, level and source itself: the record needs only its message.
    logging.basicConfig(level=logging.WARNING, handlers=[RichHandler(console=console)],
                        format="%(message)s", force=True)
    previous = signal.signal(signal.SIGTERM, terminate)
    saver = ScreenSaver(screens)
    last: list[RunState] = []
    try:
        with Live(console=console, refresh_per_second=2, transient=False,
                  auto_refresh=False) as live:

            def refresh(state: RunState) -> None:
                last[:] = [state]
                if settings.dashboard:
                    live.update(render(state), refresh=True)
                saver.maybe(state)

            run_dir, summary = scenario.run(settings, dataset, refresh)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if last:
        saver.save(last[0], "dashboard-final.svg")
    json_path, html_path = report.write(run_dir, summary)
    console.print(f"[bold]summary[/] {json_path}\n[bold]report[/]  {html_path}")
    return run_dir
