"""The online trainer as an operating-system process: threads, metrics endpoint, signals."""

from __future__ import annotations

import signal
import threading

from online_trainer.service import TrainerService
from online_trainer.settings import TrainSettings


def run_trainer(settings: TrainSettings, idle_exit_s: float | None) -> None:
    """Trains until SIGTERM/SIGINT (or `idle_exit_s` without records, when given)."""
    from prometheus_client import start_http_server

    settings.apply_cpu_nice()
    if settings.threads:
        import torch

        torch.set_num_threads(settings.threads)
    if settings.metrics_port:
        start_http_server(settings.metrics_port, addr=settings.metrics_host)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    service = TrainerService(settings)
    service.run(stop, idle_exit_s=idle_exit_s)
