"""`streamrec stream | train | retrain | archive | serve | monitor`: the long-running services.

Every setting is a STREAMREC_* variable read by the service's own settings object; an option
given here wins over its variable.
"""

from __future__ import annotations

import os

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
        None, help="Events per batch (STREAMREC_BATCH_MAX_EVENTS)."
    ),
) -> None:
    """Run one feature worker: interactions -> point-in-time features in Redis. Workers sharing
    a group id split the partitions."""
    overrides = {
        "STREAMREC_GROUP_ID": group_id,
        "STREAMREC_INSTANCE_ID": instance_id,
        "STREAMREC_METRICS_PORT": metrics_port,
        "STREAMREC_BATCH_MAX_EVENTS": batch_max_events,
    }
    os.environ.update({k: str(v) for k, v in overrides.items() if v is not None})
    from streams.feature_worker.worker import main

    main()


def train(
    idle_exit_s: float = typer.Option(
        0.0, help="Exit after this many idle seconds (0 = run until SIGTERM/SIGINT)."
    ),
) -> None:
    """Online trainer: prequential micro-batches from `interactions`, gated publication."""
    from online_trainer.process import run_trainer
    from online_trainer.settings import TrainSettings

    run_trainer(TrainSettings(), idle_exit_s or None)


def retrain(
    nproc: int = typer.Option(
        1, min=1, help="Processes; >1 shards the embedding tables over them under torchrun."
    ),
    batch_size: int | None = typer.Option(
        None, min=1, help="Sequences per step; the learning rate scales with it (linear rule)."
    ),
) -> None:
    """Full retrain now: replay the window from Kafka, train, validate, publish a new major."""
    from online_trainer.retrain_job import run_retrain

    version = run_retrain(nproc, batch_size=batch_size)
    typer.echo(f"published major version {version}")


def archive(
    archive_dir: str | None = typer.Option(
        None, help="Archive root (STREAMREC_ARCHIVE_DIR); the retrain's STREAMREC_ARCHIVE_DIR "
        "must name the same."
    ),
    retention_days: int | None = typer.Option(
        None, min=1, help="Delete day folders older than this (STREAMREC_RETENTION_DAYS)."
    ),
) -> None:
    """Compaction job: copy `interactions` up to its end now into the Parquet window archive
    (partitioned by day), then exit. Resumes where the archive ends; run it on a schedule."""
    overrides = {"STREAMREC_ARCHIVE_DIR": archive_dir, "STREAMREC_RETENTION_DAYS": retention_days}
    os.environ.update({k: str(v) for k, v in overrides.items() if v is not None})
    from online_trainer.archive_job import run_archive
    from online_trainer.archive_settings import ArchiveSettings

    run = run_archive(ArchiveSettings())
    typer.echo(
        f"archived rows={run.rows} dead_lettered={run.invalid} batches={run.batches} "
        f"pruned_days={run.pruned_days} complete={run.complete}"
    )
    if not run.complete:
        raise typer.Exit(3)


def serve() -> None:
    """Run one scorer: rec.requests -> retrieval, filtering, ranking, ordering -> rec.responses.
    It serves the versions model.updates names, each verified against the digest announced
    for it. Start more with the same group id to share the load."""
    from serving.process import run_scorer
    from serving.settings import ServeSettings

    run_scorer(ServeSettings())


def monitor() -> None:
    """Join recommendations with later interactions; publish KPIs (`kpi.metrics`, Prometheus)
    and drift alerts (`alerts.drift`)."""
    from streams.monitor.process import run_monitor
    from streams.monitor.settings import MonitorSettings

    run_monitor(MonitorSettings())
