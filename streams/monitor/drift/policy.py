"""Turns detector findings into `DriftAlert`s: severity, suggested action, and debouncing.

- Cooldown: after an alert, the same detector stays quiet for `cooldown_s` of event time, so one
  regression is one alert, not a storm.
- Rollback vs retrain: a KPI drop that began within `rollback_windows` KPI windows after a new
  deployment first served points at that deployment (roll it back); any other drop is drift in
  the world (retrain). Versions already serving when the monitor started are not "new", and with
  `rollback_blames="major"` only the first version of a new major counts as a deployment.
- Times are event times, so a replay of the same topics yields the same alerts (and alert ids).
"""

from __future__ import annotations

import logging
import time
from typing import Literal

from schemas.alerts import DriftAlert
from streams.monitor.drift.config import DriftSettings
from streams.monitor.drift.detectors import KpiDrop
from streams.monitor.drift.freshness import Transition

logger = logging.getLogger(__name__)

Severity = Literal["info", "warning", "critical"]
Action = Literal["retrain", "rollback", "none"]
FreshnessKind = Literal["feature", "model"]

_MAX_TRACKED_VERSIONS = 1_000
_SCORE_BOUND = 1e6  # DriftAlert.baseline/current are Score fields bounded by +-1e6


def _bounded(value: float) -> float:
    return max(-_SCORE_BOUND, min(_SCORE_BOUND, value))


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


class AlertPolicy:
    def __init__(self, settings: DriftSettings, kpi_window_s: float) -> None:
        self._settings = settings
        self._kpi_window_s = kpi_window_s
        self._last_alert: dict[str, float] = {}
        self._first_seen: dict[str, float] = {}
        self._new_versions: set[str] = set()
        self._lineages: set[str] = set()
        self._started_at: float | None = None
        self._freshness_raised: set[str] = set()
        self.suppressed = 0

    def observe_version(self, version: str, at: float) -> None:
        """Record when a model version first served (called for every attributed response)."""
        if version in self._first_seen:
            return
        if self._started_at is None:
            self._started_at = at
        self._first_seen[version] = at
        # A version reaching here is new; under "major" it is a deployment only if its major is.
        # (Majors are few: this set stays small where the per-version maps are bounded.)
        new_lineage = True
        if self._settings.rollback_blames == "major":
            major = version.split(".", 1)[0]
            new_lineage = major not in self._lineages
            self._lineages.add(major)
        # Versions seen in the first window were already live when we started: not deployments.
        if new_lineage and at - self._started_at > self._kpi_window_s:
            self._new_versions.add(version)
            logger.info("new model version version=%s first_served=%s", version, _iso(at))
        if len(self._first_seen) > _MAX_TRACKED_VERSIONS:
            oldest = next(iter(self._first_seen))
            del self._first_seen[oldest]
            self._new_versions.discard(oldest)

    def _cooling_down(self, detector: str, at: float) -> bool:
        last = self._last_alert.get(detector)
        if last is not None and at - last < self._settings.cooldown_s:
            self.suppressed += 1
            logger.info(
                "alert suppressed detector=%s cooldown_s=%s", detector, self._settings.cooldown_s
            )
            return True
        self._last_alert[detector] = at
        return False

    def _deployment_before(self, drop: KpiDrop) -> str | None:
        """The newest version that first served shortly before (or during) the drop."""
        earliest = drop.started_at - self._settings.rollback_windows * self._kpi_window_s
        candidates = [
            (at, v) for v, at in self._first_seen.items()
            if v in self._new_versions and earliest <= at <= drop.detected_at
        ]
        return max(candidates)[1] if candidates else None

    def on_kpi_drop(self, drop: KpiDrop, serving_version: str) -> DriftAlert | None:
        detector = f"kpi.{drop.metric}"
        if self._cooling_down(detector, drop.detected_at):
            return None
        deployed = self._deployment_before(drop)
        action: Action = "rollback" if deployed else "retrain"
        severity: Severity = (
            "critical"
            if deployed or drop.relative_drop >= self._settings.critical_relative_drop
            else "warning"
        )
        blame = (
            f"; version {deployed} first served {_iso(self._first_seen[deployed])}"
            if deployed else ""
        )
        message = (
            f"{drop.metric} fell from {drop.baseline:.4f} to {drop.current:.4f} "
            f"(-{drop.relative_drop:.0%}) over {drop.observations_since_change} responses since "
            f"{_iso(drop.started_at)}{blame}"
        )
        # The change point tells a retrain where the new regime starts (see DriftAlert).
        return self._alert(
            detector, drop.metric, deployed or serving_version, drop.baseline, drop.current,
            severity, action, drop.detected_at, message, change_started_at=drop.started_at,
        )

    def on_psi(self, feature: str, value: float, at: float) -> DriftAlert | None:
        if value < self._settings.psi_warning:
            return None
        detector = f"psi.{feature}"
        if self._cooling_down(detector, at):
            return None
        critical = value >= self._settings.psi_critical
        message = f"{feature} distribution shifted from the training reference (PSI {value:.3f})"
        return self._alert(
            detector, f"psi.{feature}", None, 0.0, value,
            "critical" if critical else "warning", "retrain" if critical else "none", at, message,
        )

    def on_freshness(
        self, kind: FreshnessKind, transition: Transition, p95_s: float, limit_s: float, at: float
    ) -> DriftAlert | None:
        detector = f"freshness.{kind}"
        if transition == "cleared":
            if detector not in self._freshness_raised:
                return None
            self._freshness_raised.discard(detector)
            message = f"p95 {kind} age back to {p95_s:.1f}s (below {limit_s:.1f}s)"
            return self._alert(
                detector, f"{kind}_freshness_p95_s", None, limit_s, p95_s, "info", "none", at,
                message,
            )
        if self._cooling_down(detector, at):
            return None
        self._freshness_raised.add(detector)
        # A stale model is fixed by training; stale features are a pipeline problem to look at.
        action: Action = "retrain" if kind == "model" else "none"
        message = f"p95 {kind} age {p95_s:.1f}s is above {limit_s:.1f}s"
        return self._alert(
            detector, f"{kind}_freshness_p95_s", None, limit_s, p95_s, "warning", action, at,
            message,
        )

    def _alert(
        self,
        detector: str,
        metric: str,
        model_version: str | None,
        baseline: float,
        current: float,
        severity: Severity,
        action: Action,
        at: float,
        message: str,
        change_started_at: float | None = None,
    ) -> DriftAlert:
        logger.warning(
            "drift alert detector=%s metric=%s severity=%s action=%s baseline=%.4f current=%.4f",
            detector, metric, severity, action, baseline, current,
        )
        return DriftAlert(
            alert_id=f"{detector}-{round(at * 1000)}",
            detector=detector,
            metric=metric,
            model_version=model_version,
            baseline=_bounded(baseline),
            current=_bounded(current),
            severity=severity,
            suggested_action=action,
            detected_at=at,
            change_started_at=change_started_at,
            message=message[:2048],
        )
