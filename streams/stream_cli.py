"""`streamrec stream` (the feature worker) and `streamrec bench ingest`, as plain typer functions.

Heavy imports (faust, the worker) happen inside the bodies so that `streamrec --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer


def stream() -> None:
    """Run one feature worker: interactions -> point-in-time features in Redis.

    Configured by STREAMREC_* variables (see streams/settings.py: STREAMREC_GROUP_ID,
    STREAMREC_INSTANCE_ID, STREAMREC_BATCH_MAX_EVENTS, STREAMREC_METRICS_PORT, ...). Start more
    with the same group id to split the partitions.
    """
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
    batch: int = typer.Option(1000, min=1, help="Worker batch size (events per Redis round trip)."),
) -> None:
    """Sustained events/s of one feature worker, event->feature freshness, raw consume rate."""
    from bench.ingest import run

    run(json_path, events=events, rate=rate, seconds=seconds, batch=batch)
