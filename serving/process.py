"""The scorer as an operating-system process: signals, start-up, health watch, shutdown."""

from __future__ import annotations

import logging
import signal
import threading

from serving.service import ScorerService
from serving.settings import ServeSettings

logger = logging.getLogger(__name__)


def run_scorer(settings: ServeSettings) -> None:
    """Serves until SIGTERM/SIGINT, or until one of the scorer's loops stops."""
    settings.apply_cpu_nice()
    service = ScorerService(settings)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    service.start()
    while not stopping.wait(1.0):
        if not service.healthy():
            logger.error("a scorer loop stopped; shutting down")
            break
    service.stop()
