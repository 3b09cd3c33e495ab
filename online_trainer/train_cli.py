"""`streamrec train`, `streamrec retrain` and `streamrec bench online`."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path

import typer

logger = logging.getLogger(__name__)


def train(
    idle_exit_s: float = typer.Option(
        0.0, help="Exit after this many idle seconds (0 = run until SIGTERM/SIGINT)."
    ),
) -> None:
    """Online trainer: prequential micro-batches from `interactions`, gated publication."""
    from prometheus_client import start_http_server

    from online_trainer.service import TrainerService
    from online_trainer.settings import TrainSettings

    settings = TrainSettings()
    settings.apply_cpu_nice()
    if settings.threads:
        import torch

        torch.set_num_threads(settings.threads)
    if settings.metrics_port:
        start_http_server(settings.metrics_port, addr="127.0.0.1")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    service = TrainerService(settings)
    service.run(stop, idle_exit_s=idle_exit_s or None)


def retrain(
    nproc: int = typer.Option(1, min=1, help="Processes; >1 runs data-parallel under torchrun."),
) -> None:
    """Full retrain now: replay the window from Kafka, train, validate, publish a new major."""
    from online_trainer.retrain_job import run_retrain

    version = run_retrain(nproc)
    typer.echo(f"published major version {version}")


def bench_online(
    json_path: Path = typer.Option(Path("bench/results/online.json"), "--json"),
    rate: float = typer.Option(1000.0, help="Events/s offered for the streamed second half."),
    pretrain_s: float = typer.Option(120.0, help="Budget for training the first-half model."),
) -> None:
    """ML-100K through Kafka: frozen first-half model vs the online model on the second half."""
    from bench.online import run

    run(json_path, rate=rate, pretrain_s=pretrain_s)
