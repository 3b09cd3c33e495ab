"""`streamrec demo`: the closed loop, live, on the local stack."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from deploy.demo.dataset import DemoDataset
    from deploy.demo.settings import DemoSettings


def demo(
    events_per_s: float | None = typer.Option(None, help="Live replay rate (events/s)."),
    drift_after_s: float | None = typer.Option(None, help="Live seconds before the drift."),
    max_live_s: float | None = typer.Option(None, help="Hard cap of the live phase (s)."),
    dashboard: bool | None = typer.Option(None, help="Show the live terminal dashboard."),
    screen: Path | None = typer.Option(None, help="Also save the last dashboard screen as SVG."),
    interactions: Path | None = typer.Option(
        None, help="CSV with user_id,item_id,timestamp replayed instead of ML-100K."
    ),
) -> None:
    """The closed loop live: ML-100K (or --interactions) replayed as a stream, a drift, an
    alert, a retrain, a recovery. Other settings: STREAMREC_DEMO__* (deploy/demo/settings.py)."""
    from deploy.demo.live import run_demo
    from deploy.demo.settings import DemoSettings

    overrides = {
        k: v for k, v in {
            "events_per_s": events_per_s, "drift_after_s": drift_after_s,
            "max_live_s": max_live_s, "dashboard": dashboard, "interactions": interactions,
        }.items() if v is not None
    }
    # Validated like the environment's values: the command line wins over STREAMREC_DEMO__*.
    settings = DemoSettings.model_validate({**DemoSettings().model_dump(), **overrides})
    run_dir = run_demo(settings, demo_dataset(settings), screen)
    typer.echo(f"report: {run_dir / 'report.html'}  summary: {run_dir / 'summary.json'}")


def demo_dataset(settings: DemoSettings) -> DemoDataset:
    """The run's dataset, loaded and checked before anything starts: a CSV the run cannot
    replay is a bad parameter, named with its problem."""
    from deploy.demo.dataset import load
    from models.datasets import DatasetError

    try:
        return load(settings)
    except DatasetError as error:
        if settings.interactions is None:
            raise  # ML-100K itself could not be fetched: not the caller's parameter
        raise typer.BadParameter(
            str(error), param_hint="'--interactions' (STREAMREC_DEMO__INTERACTIONS)"
        ) from error
