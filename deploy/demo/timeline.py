"""Samples of a run once per refresh: what the dashboard shows and the report plots."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

from deploy.demo.traffic import TrafficStats


@dataclass(frozen=True)
class Sample:
    t: float
    events: int
    events_per_s: float
    requests: int
    answered: int
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    freshness_p50_ms: float | None
    client_hit_rate: float | None
    applied: float
    trained: float
    alerts: int
    versions: int


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


class Timeline:
    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self._seen = (0, 0, 0, 0, 0)  # events, answered, latencies, freshness, hits: last sample

    def add(
        self, t: float, stats: TrafficStats, services: dict[str, dict[str, float]],
        alerts: int, versions: int,
    ) -> Sample:
        events, answered, lat_i, fresh_i, hits = self._seen
        last_t = self.samples[-1].t if self.samples else 0.0
        latencies = stats.latencies_ms[lat_i:]
        new_answered = stats.answered - answered
        sample = Sample(
            t=round(t, 2),
            events=stats.events,
            events_per_s=round((stats.events - events) / max(t - last_t, 1e-6), 1),
            requests=stats.requests,
            answered=stats.answered,
            latency_p50_ms=percentile(latencies, 50),
            latency_p99_ms=percentile(latencies, 99),
            freshness_p50_ms=percentile(stats.feature_freshness_ms[fresh_i:], 50),
            client_hit_rate=(stats.client_hits - hits) / new_answered
            if new_answered else None,
            applied=services.get("worker", {}).get("streamrec_stream_events_applied_total", 0.0),
            trained=services.get("trainer", {}).get("streamrec_trainer_events_total", 0.0),
            alerts=alerts,
            versions=versions,
        )
        self._seen = (
            stats.events, stats.answered, len(stats.latencies_ms),
            len(stats.feature_freshness_ms), stats.client_hits,
        )
        self.samples.append(sample)
        return sample

    def newest_answered(self) -> Sample | None:
        """The newest sample whose window had answers: after the live phase (no requests while
        the KPI windows close) the dashboard keeps showing the last latencies measured."""
        return next((s for s in reversed(self.samples) if s.latency_p50_ms is not None), None)

    def as_dicts(self) -> list[dict[str, object]]:
        return [asdict(s) for s in self.samples]


def summary_ms(values: list[float]) -> dict[str, float | None]:
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "mean": round(statistics.fmean(values), 2) if values else None,
    }
