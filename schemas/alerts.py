"""Drift alerts on `alerts.drift`, keyed by detector; they start retrains and rollbacks."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from schemas.fields import STRICT_RECORD, Id, SchemaVersion1, Score, Text, Timestamp


class DriftAlert(BaseModel):
    model_config = STRICT_RECORD

    schema_version: SchemaVersion1 = 1
    alert_id: Id
    detector: Id
    metric: Id
    model_version: Id | None = None
    baseline: Score
    current: Score
    severity: Literal["info", "warning", "critical"]
    suggested_action: Literal["retrain", "rollback", "none"]
    detected_at: Timestamp
    change_started_at: Timestamp | None = None
    """Event time the detector dates the change from, when it can (a KPI drop's change point).
    A retrain learns the new regime from here on instead of a fixed window mostly before it.
    Optional and additive: alerts without it keep their meaning."""
    message: Text = ""
