"""The monitor's logic without Kafka: records in, KPI reports and drift alerts out.

`on_response`, `on_features` and `on_interaction` fold records into the one windowed join
(streams.monitor.join; `source` names the topic-partition a record came from, for the
per-partition watermark, and `partition` the input partition whose state it joins); `advance`
moves the watermark, closes the answers whose attribution window ended (oldest first), feeds
their KPI outcomes to the KPI windows and the drift detectors, and returns the reports, alerts
and labelled ranker examples ready to publish. Everything is driven by event time, so replaying
the same records gives the same reports and alerts.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Literal

from schemas.alerts import DriftAlert
from schemas.kpi import KpiReport
from schemas.ranker_examples import RankerExample, ServedFeatures
from streams.monitor.clock import DEFAULT_SOURCE, EventClock
from streams.monitor.drift.config import KpiMetric
from streams.monitor.drift.detectors import KpiDropDetector
from streams.monitor.drift.freshness import HysteresisGuard, SampleQuantile
from streams.monitor.drift.policy import AlertPolicy, FreshnessKind
from streams.monitor.drift.profiles import FeatureProfile, psi_by_feature
from streams.monitor.inputs import Interaction, Response
from streams.monitor.join import Answer, AnswerJoin, ResponseOutcome
from streams.monitor.settings import MonitorSettings
from streams.monitor.windows import KpiWindows

logger = logging.getLogger(__name__)

RecordOutcome = Literal["applied", "unattributable", "duplicate_or_filtered", "late"]


@dataclass
class Published:
    reports: list[KpiReport] = field(default_factory=list)
    alerts: list[DriftAlert] = field(default_factory=list)
    psi: dict[str, float] = field(default_factory=dict)
    examples: list[RankerExample] = field(default_factory=list)
    closed: list[Answer] = field(default_factory=list)


def _indicator(outcome: ResponseOutcome, metric: KpiMetric) -> float:
    if metric == "hit_rate":
        return float(outcome.hit)
    if metric == "ctr":
        return float(outcome.clicked)
    return float(outcome.converted)


class _Freshness:
    """p95 of one freshness figure over samples of responses, judged with hysteresis."""

    def __init__(self, kind: FreshnessKind, high: float, low: float, size: int, runs: int) -> None:
        self.kind = kind
        self.sample = SampleQuantile(size)
        self.guard = HysteresisGuard(high=high, low=low, consecutive=runs)
        self.last_p95: float | None = None


class MonitorPipeline:
    def __init__(self, settings: MonitorSettings, reference: FeatureProfile | None = None) -> None:
        drift = settings.drift
        self._settings = settings
        self.clock = EventClock(settings.allowed_lateness_s, settings.idle_advance_s)
        self.join = AnswerJoin(
            settings.attribution_window_s, settings.k, settings.max_pending_responses
        )
        self.windows = KpiWindows(settings.window_s, settings.k)
        self.policy = AlertPolicy(drift, settings.window_s)
        self.detectors = {m: KpiDropDetector(m, drift) for m in drift.kpi_metrics}
        self._freshness = (
            _Freshness("feature", drift.feature_freshness_high_s, drift.feature_freshness_low_s,
                       drift.freshness_sample_responses, drift.freshness_consecutive),
            _Freshness("model", drift.model_freshness_high_s, drift.model_freshness_low_s,
                       drift.freshness_sample_responses, drift.freshness_consecutive),
        )
        self.reference = reference
        self._sample = FeatureProfile()
        self._pending_alerts: list[DriftAlert] = []
        self._pending_psi: dict[str, float] = {}

    def on_response(
        self, response: Response, wall: float, source: str = DEFAULT_SOURCE,
        partition: int = 0,
    ) -> RecordOutcome:
        self.clock.observe(response.served_at, wall, source)
        if self._late(response.served_at, wall):
            return "late"
        added = self.join.add_response(response, partition)
        return "applied" if added else "duplicate_or_filtered"

    def on_features(
        self, record: ServedFeatures, wall: float, source: str = DEFAULT_SOURCE,
        partition: int = 0,
    ) -> RecordOutcome:
        """`record` must have passed its vector check (`record.matrix()`)."""
        self.clock.observe(record.served_at, wall, source)
        if self._late(record.served_at, wall):
            return "late"
        added = self.join.add_features(record, partition)
        return "applied" if added else "duplicate_or_filtered"

    def _late(self, served_at: float, wall: float) -> bool:
        return served_at + self._settings.attribution_window_s < self.clock.watermark(wall)

    def on_interaction(
        self, event: Interaction, wall: float, source: str = DEFAULT_SOURCE,
        partition: int = 0,
    ) -> RecordOutcome:
        self.clock.observe(event.timestamp, wall, source)
        self._profile(event)
        kept = self.join.add_interaction(event, self.clock.watermark(wall), partition)
        return "applied" if kept else "unattributable"

    def advance(self, wall: float) -> Published:
        """Close what the watermark allows; returns the reports, alerts and examples."""
        watermark = self.clock.watermark(wall)
        published = Published(alerts=self._pending_alerts, psi=self._pending_psi)
        for closed in self.join.expire(watermark):
            published.closed.append(closed.answer)
            if closed.outcome is not None:
                self._finalise(closed.outcome, closed.answer.partition)
            if closed.example is not None:
                published.examples.append(closed.example)
        self._pending_alerts, self._pending_psi = [], {}
        published.reports = self.windows.close(watermark - self._settings.attribution_window_s)
        return published

    @property
    def reported_through(self) -> float:
        """Windows ending at or before this were reported (stored with each commit); aligned to
        window boundaries so it changes once per window, not on every watermark move."""
        closed = self.windows.closed_through
        return self.windows.start_of(closed) if math.isfinite(closed) else closed

    def resume_after(self, reported_through: float) -> None:
        """After a restart: outcomes of windows already reported are dropped, not re-reported."""
        self.windows.closed_through = max(self.windows.closed_through, reported_through)

    def _finalise(self, outcome: ResponseOutcome, partition: int) -> None:
        if not self.windows.add(outcome, partition):
            return
        self.policy.observe_version(outcome.model_version, outcome.served_at)
        for metric, detector in self.detectors.items():
            drop = detector.update(_indicator(outcome, metric), outcome.served_at)
            if drop is not None:
                self._emit(self.policy.on_kpi_drop(drop, outcome.model_version))
        self._observe_freshness(self._freshness[0], outcome.feature_freshness_s, outcome.served_at)
        self._observe_freshness(self._freshness[1], outcome.model_freshness_s, outcome.served_at)

    def _observe_freshness(self, freshness: _Freshness, value: float | None, at: float) -> None:
        if value is None:
            return
        p95 = freshness.sample.add(value)
        if p95 is None:
            return
        freshness.last_p95 = p95
        transition = freshness.guard.update(p95)
        if transition is not None:
            limit = freshness.guard.high if transition == "raised" else freshness.guard.low
            self._emit(self.policy.on_freshness(freshness.kind, transition, p95, limit, at))

    def _profile(self, event: Interaction) -> None:
        self._sample.add(event)
        if self._sample.events < self._settings.drift.psi_sample_events:
            return
        sample, self._sample = self._sample, FeatureProfile()
        if self.reference is None:
            logger.info("psi reference bootstrapped from live traffic events=%d", sample.events)
            self.reference = sample
            return
        for feature, value in psi_by_feature(self.reference, sample).items():
            self._pending_psi[feature] = value
            self._emit(self.policy.on_psi(feature, value, event.timestamp))

    def _emit(self, alert: DriftAlert | None) -> None:
        if alert is not None:
            self._pending_alerts.append(alert)

    def sources(self, partition: int) -> list[str]:
        """The clock's sources that read `partition` (one per input topic)."""
        return self.clock.sources_of(partition)

    def freshness_p95(self) -> dict[str, float]:
        return {f.kind: f.last_p95 for f in self._freshness if f.last_p95 is not None}
