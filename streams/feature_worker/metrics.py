"""Prometheus metrics of the feature workers.

Conservation holds over a worker's lifetime: events_in = applied + skipped + dead_lettered, where
skipped counts re-delivered events that Redis had already applied (the idempotence check).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

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
        self.batch_seconds = Histogram(
            "streamrec_stream_batch_seconds",
            "Time to validate, apply and flush one batch.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.freshness_seconds = Histogram(
            "streamrec_stream_freshness_seconds",
            "Record time in Kafka to features applied in Redis: the pipeline's lag.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
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
