"""The monitor as an operating-system process: signals, metrics endpoint, run until stopped."""

from __future__ import annotations

import logging
import signal
import threading

from streams.monitor.service import MonitorService
from streams.monitor.settings import MonitorSettings

logger = logging.getLogger(__name__)


def run_monitor(settings: MonitorSettings) -> None:
    settings.apply_cpu_nice()
    service = MonitorService(settings)
    stop = threading.Event()

    def _request_stop(signum: int, _frame: object) -> None:
        logger.info("stopping signal=%d", signum)
        stop.set()

    signal.signal(signal.SIGTERM, _request_stop)
    signal.signal(signal.SIGINT, _request_stop)
    service.metrics.serve(settings.metrics_port, settings.metrics_host)
    service.run(stop)
