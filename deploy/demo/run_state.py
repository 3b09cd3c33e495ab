"""What one demo run knows at a moment: the dashboard draws it, the summary reports it."""

from __future__ import annotations

from dataclasses import dataclass, field

from deploy.demo.bootstrap import RunLayout
from deploy.demo.dataset import DemoDataset
from deploy.demo.observer import Observer
from deploy.demo.settings import DemoSettings
from deploy.demo.timeline import Timeline
from deploy.demo.traffic import Traffic


@dataclass
class RunState:
    """What the dashboard shows; updated by the scenario once per refresh."""

    run: RunLayout
    settings: DemoSettings
    dataset: DemoDataset
    phase: str = "starting"
    live_start: float | None = None
    drift_at: float | None = None
    retrained_at: float | None = None
    retrained_version: str | None = None
    timeline: Timeline = field(default_factory=Timeline)
    observer: Observer | None = None
    traffic: Traffic | None = None
    services: dict[str, dict[str, float]] = field(default_factory=dict)
    backfill: int = 0
    backfill_end_at: float | None = None
    """The backfill's newest event time (its events are `frame_events(first, end_at)`)."""
    first_version: str | None = None
    """The pre-trained version (the `frozen` arm's until a drift retrain)."""
    frozen_pins: list[tuple[float, str]] = field(default_factory=list)
    """(live seconds, version) of each later pin of the `frozen` arm (deploy/demo/arms.py)."""
