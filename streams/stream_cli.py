"""`streamrec stream` (the feature worker) and `streamrec bench ingest`, as plain typer functions.

Heavy imports (faust, the worker) happen inside the bodies so that `streamrec --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer


def stream(
    group_id: str | None = typer.Option(None, help="Consumer group (STREAMREC_GROUP_ID)."),
    instance_id: str | None = typer.Option(
        None, help="Static membership id, unique per worker (STREAMREC_INSTANCE_ID)."
    ),
    metrics_port: int | None = typer.Option(
        None, help="Prometheus port on 127.0.0.1, 0 = off (STREAMREC_METRICS_PORT)."
    ),
    batch_max_events: int | None = typer.Option(
        None, help="Events per Redis round trip (STREAMREC_BATCH_MAX_EVENTS)."
    ),
) -> None:
    """Run one feature worker: interactions -> point-in-time features in Redis.

    Every setting is a STREAMREC_* variable (streams/settings.py); an option given here wins
    over its variable. Workers sharing a group id split the partitions.
    """
    import os

    overrides = {
        "STREAMREC_GROUP_ID": group_id,
        "STREAMREC_INSTANCE_ID": instance_id,
        "STREAMREC_METRICS_PORT": metrics_port,
        "STREAMREC_BATCH_MAX_EVENTS": batch_max_events,
    }
    os.environ.update({k: str(v) for k, v in overrides.items() if v is not None})
    from streams.worker import main

    main()


def bench_ingest(
    json_path: Path = typer.Option(
        Path("bench/results/ingest.json"), "--json", help="Output JSON."
    ),
    events: int = typer.Option(
        200_000, min=1000, help="Backlog drained for the throughput figure."
    ),
    rate: float = typer.Option(5_000.0, min=1.0, help="Offered events/s for the freshness run."),
    seconds: float = typer.Option(20.0, min=1.0, help="Duration of the freshness run."),
    batch: int = typer.Option(
        1000,
        min=1,
        help="Worker batch size (events per commit; one Redis script call per "
        "STREAMREC_SCRIPT_CHUNK_EVENTS of them).",
    ),
    low_rate: float = typer.Option(
        1_000.0, min=1.0, help="Offered events/s, second freshness run."
    ),
) -> None:
    """Sustained events/s of one feature worker, event->feature freshness, raw consume rate."""
    from bench.ingest import run

    run(json_path, events=events, rate=rate, seconds=seconds, batch=batch, low_rate=low_rate)
