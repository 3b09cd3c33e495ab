"""Prometheus metrics of the feature workers.

Conservation holds over a worker's lifetime: events_in = applied + skipped + dead_lettered, where
skipped counts re-delivered events that Redis had already applied (the idempotence check).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

_LATENCY_BUCKETS = (
    *(0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.125, 0.15),
    *(0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0),
)


class StreamMetrics:
    """One registry per instance, so tests and benchmarks can hold several in one process."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.events_in = Counter(
            "streamrec_stream_events_in", "Records read from interactions.", registry=r
        )
        self.applied = Counter(
            "streamrec_stream_events_applied", "Events whose features were written.", registry=r
        )
        self.skipped = Counter(
            "streamrec_stream_events_skipped",
            "Re-delivered events Redis had already applied (idempotence check).",
            registry=r,
        )
        self.dead_lettered = Counter(
            "streamrec_stream_events_dead_lettered",
            "Records sent to the dead-letter topic.",
            ["stage"],
            registry=r,
        )
        self.retries = Counter(
            "streamrec_stream_retries",
            "Back-offs while Redis or Kafka was unavailable.",
            ["dependency"],
            registry=r,
        )
        self.rewinds = Counter(
            "streamrec_stream_rewinds",
            "Rewinds to the last durable offsets because Redis came back as a new process.",
            registry=r,
        )
        self.batch_seconds = Histogram(
            "streamrec_stream_batch_seconds",
            "Time to validate, apply and flush one batch.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.freshness_seconds = BatchHistogram(
            "streamrec_stream_freshness_seconds",
            "Record time in Kafka to features applied in Redis: the pipeline's lag.",
            _LATENCY_BUCKETS,
            r,
        )
        self.assigned_partitions = Gauge(
            "streamrec_stream_assigned_partitions", "Partitions this worker owns now.", registry=r
        )
        self.consumer_lag = Gauge(
            "streamrec_stream_consumer_lag",
            "Records behind the partition's high watermark.",
            ["partition"],
            registry=r,
        )

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        """Expose /metrics on host:port (0 disables it)."""
        if port:
            start_http_server(port, addr=host, registry=self.registry)


class BatchHistogram(Collector):
    """A histogram observed a batch of values at a time, exposed as prometheus_client's
    Histogram is (`_bucket{le=...}`, `_count`, `_sum`): one pass of numpy per batch, where
    Histogram.observe takes a lock and searches the buckets once per value, which on the
    worker's every event was a tenth of its CPU."""

    def __init__(
        self, name: str, documentation: str, buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._bounds = np.array(buckets, dtype=np.float64)
        self._counts = np.zeros(len(buckets) + 1, dtype=np.int64)
        """Per bucket (the last one +Inf), the values in it alone (not cumulative)."""
        self._sum = 0.0
        self._lock = threading.Lock()  # the /metrics server thread reads while the loop adds
        registry.register(self)

    def observe_many(self, values: npt.NDArray[np.float64]) -> None:
        # A value equal to a bound counts in that bound's bucket (le), as Histogram does.
        counts = np.bincount(
            np.searchsorted(self._bounds, values, side="left"), minlength=len(self._counts)
        )
        total = float(values.sum())
        with self._lock:
            self._counts += counts
            self._sum += total

    def collect(self) -> Iterator[HistogramMetricFamily]:
        with self._lock:
            cumulative: list[int] = np.cumsum(self._counts).tolist()
            total = self._sum
        bounds = [floatToGoString(b) for b in self._bounds.tolist()]  # type: ignore[no-untyped-call]
        bounds.append("+Inf")
        yield HistogramMetricFamily(
            self._name, self._documentation,
            buckets=list(zip(bounds, cumulative, strict=True)), sum_value=total,
        )
