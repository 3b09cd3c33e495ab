"""The monitor's Prometheus metrics (one registry per service instance, so tests can read them).

Names are listed in deploy/prometheus/alerts.yml and deploy/grafana/streamrec.json; change them
together. `model_version` labels are bounded by the number of versions serving at once.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from schemas.alerts import DriftAlert
from schemas.kpi import KpiReport


class MonitorMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.records = Counter(
            "streamrec_monitor_records", "Records read, by topic and outcome.",
            ["topic", "outcome"], registry=r,
        )
        self.pending = Gauge(
            "streamrec_monitor_pending_responses", "Responses awaiting attribution.", registry=r
        )
        self.unmatched = Gauge(
            "streamrec_monitor_unmatched_interactions",
            "Interactions ahead of the watermark kept for responses still to arrive.", registry=r,
        )
        self.evicted_early = Counter(
            "streamrec_monitor_evicted_early",
            "Responses finalised before their window closed (pending cap reached).", registry=r,
        )
        self.app_restarts = Counter(
            "streamrec_monitor_app_restarts",
            "Stream apps replaced after they crashed (a broker outage), by the crash's exception.",
            ["reason"], registry=r,
        )
        self.watermark_lag = Gauge(
            "streamrec_monitor_watermark_lag_seconds", "Wall clock minus event-time watermark.",
            registry=r,
        )
        self.consumer_lag = Gauge(
            "streamrec_monitor_consumer_lag", "Records behind the partition's high watermark.",
            ["topic", "partition"], registry=r,
        )
        self.kpi_rate = Gauge(
            "streamrec_kpi_rate",
            "The last closed window's KPI (hit_rate_at_k, ctr, conversion_rate) per model version "
            "and experiment arm (\"\" outside any experiment).",
            ["model_version", "arm", "kpi"], registry=r,
        )
        self.kpi_counts = Counter(
            "streamrec_kpi_responses", "Attributed responses by model version and result "
            "(all, hit, click, conversion) and experiment arm.", ["model_version", "arm", "result"],
            registry=r,
        )
        self.kpi_window_end = Gauge(
            "streamrec_kpi_window_end_timestamp_seconds", "End of the last closed KPI window.",
            ["model_version"], registry=r,
        )
        self.alerts = Counter(
            "streamrec_drift_alerts", "Drift alerts published.",
            ["detector", "severity", "action"], registry=r,
        )
        self.psi = Gauge(
            "streamrec_drift_psi", "Last PSI against the training reference.", ["feature"],
            registry=r,
        )
        self.kpi_estimate = Gauge(
            "streamrec_drift_kpi_estimate", "ADWIN's current estimate of each KPI (all traffic).",
            ["kpi"], registry=r,
        )
        self.freshness = Gauge(
            "streamrec_monitor_freshness_p95_seconds",
            "p95 feature lag / model age of served responses (last sample).", ["kind"], registry=r,
        )

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        if port:
            start_http_server(port, addr=host, registry=self.registry)

    def report(self, report: KpiReport) -> None:
        version, arm = report.model_version, report.arm or ""
        for kpi, value in (
            ("hit_rate_at_k", report.hit_rate_at_k),
            ("ctr", report.ctr),
            ("conversion_rate", report.conversion_rate),
        ):
            self.kpi_rate.labels(version, arm, kpi).set(value)
        for result, count in (
            ("all", report.responses), ("hit", report.hits),
            ("click", report.clicks), ("conversion", report.conversions),
        ):
            self.kpi_counts.labels(version, arm, result).inc(count)
        self.kpi_window_end.labels(version).set(report.window_end)

    def alert(self, alert: DriftAlert) -> None:
        self.alerts.labels(alert.detector, alert.severity, alert.suggested_action).inc()
