"""`streamrec monitor` and `streamrec bench drift`: plain functions the CLI registers.

Heavy imports (Kafka, River, pydantic models) happen inside the bodies so `streamrec --help`
stays instant.
"""

from __future__ import annotations

from pathlib import Path

import typer


def monitor() -> None:
    """Join recommendations with later interactions; publish KPIs (`kpi.metrics`, Prometheus)
    and drift alerts (`alerts.drift`). Configured by STREAMREC_* variables (MonitorSettings)."""
    import logging
    import signal
    import threading

    from streams.monitor.service import MonitorService
    from streams.monitor.settings import MonitorSettings

    settings = MonitorSettings()
    settings.apply_cpu_nice()
    service = MonitorService(settings)
    stop = threading.Event()

    def _request_stop(signum: int, _frame: object) -> None:
        logging.getLogger(__name__).info("stopping signal=%d", signum)
        stop.set()

    signal.signal(signal.SIGTERM, _request_stop)
    signal.signal(signal.SIGINT, _request_stop)
    service.metrics.serve(settings.metrics_port)
    service.run(stop)


def bench_drift(
    json_path: Path = typer.Option(Path("bench/results/drift.json"), "--json", help="Output JSON."),
    seeds: int = typer.Option(5, min=1, max=100, help="Synthetic streams per scenario."),
    stationary_events: int = typer.Option(
        200_000, min=10_000, help="Responses in each stationary stream."
    ),
    p_before: float = typer.Option(0.30, min=0.01, max=0.99, help="Hit probability before."),
    p_after: float = typer.Option(0.15, min=0.0, max=0.99, help="Hit probability after the shift."),
) -> None:
    """Detection delay after an abrupt KPI drop, and false alarms on a stationary stream."""
    from bench.drift import bench_drift as run

    run(json_path, seeds=seeds, stationary_events=stationary_events, p_before=p_before,
        p_after=p_after)
