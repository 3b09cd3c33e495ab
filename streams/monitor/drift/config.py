"""`DriftSettings`: every threshold the drift detectors and the alert policy use, in one place.

Embedded in `MonitorSettings` as `drift` (env `STREAMREC_DRIFT__ADWIN_DELTA=...`). The defaults are
the configuration `streamrec bench drift` measures (bench/results/drift.json): change them there
first, never to silence one alert.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

KpiMetric = Literal["hit_rate", "ctr", "conversion_rate"]


class DriftSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kpi_metrics: tuple[KpiMetric, ...] = Field(
        ("hit_rate", "ctr"),
        description="Per-response indicators watched by an ADWIN detector each (one per metric).",
    )
    adwin_delta: float = Field(
        1e-5,
        gt=0.0,
        lt=1.0,
        description=(
            "ADWIN confidence: the bound on the false-alarm probability of one cut test. River's "
            "default 0.002 is tuned for accuracy streams; 1e-5 costs ~30% more detection delay "
            "on a 0.30 -> 0.15 hit-rate drop (~400 responses) and keeps a 200k-response "
            "stationary stream free of false alarms across seeds."
        ),
    )
    adwin_clock: int = Field(
        32, ge=1, le=1024, description="ADWIN checks for a cut every N updates."
    )
    min_relative_drop: float = Field(
        0.10,
        ge=0.0,
        lt=1.0,
        description="Statistically significant drops smaller than this (relative) are not alerted.",
    )
    critical_relative_drop: float = Field(
        0.30, gt=0.0, le=1.0, description="A relative KPI drop at least this large is critical."
    )
    change_point_memory: int = Field(
        65_536,
        ge=1_024,
        le=1_048_576,
        description="Event times remembered to date the start of a drop (bounds memory).",
    )
    cooldown_s: float = Field(
        1800.0, ge=0.0, description="Event-time seconds one detector stays quiet after an alert."
    )
    rollback_windows: int = Field(
        3,
        ge=0,
        le=1000,
        description=(
            "A drop that started within this many KPI windows after a new model version first "
            "served suggests rollback; any other drop suggests retrain."
        ),
    )
    rollback_blames: Literal["major", "any"] = Field(
        "major",
        description=(
            "Which deployments a drop can be blamed on. `major`: only the first version of a "
            "new major (a full retrain replaces the model wholesale); minor versions are "
            "incremental updates that passed the trainer's validation gate against the serving "
            "version on the same events, and published every few seconds one would precede "
            "every drop, turning drift in the world into rollbacks. `any`: every new version."
        ),
    )
    psi_sample_events: int = Field(
        5_000, ge=100, le=10_000_000, description="Interactions per PSI evaluation."
    )
    psi_warning: float = Field(0.10, gt=0.0, description="PSI at or above this warns.")
    psi_critical: float = Field(0.25, gt=0.0, description="PSI at or above this is critical.")
    freshness_sample_responses: int = Field(
        200, ge=10, le=1_000_000, description="Responses per freshness evaluation (p95)."
    )
    feature_freshness_high_s: float = Field(
        60.0, gt=0.0, description="p95 feature lag above this raises a freshness alert."
    )
    feature_freshness_low_s: float = Field(
        30.0, gt=0.0, description="...and it clears only below this (hysteresis)."
    )
    model_freshness_high_s: float = Field(
        6 * 3600.0, gt=0.0, description="p95 model age above this raises (suggests retrain)."
    )
    model_freshness_low_s: float = Field(3 * 3600.0, gt=0.0, description="Clears below this.")
    freshness_consecutive: int = Field(
        2, ge=1, le=100, description="Evaluations in a row above `high` before raising."
    )

    @model_validator(mode="after")
    def _ordered_thresholds(self) -> Self:
        if self.psi_critical < self.psi_warning:
            raise ValueError("psi_critical must be >= psi_warning")
        if self.feature_freshness_low_s > self.feature_freshness_high_s:
            raise ValueError("feature_freshness_low_s must be <= feature_freshness_high_s")
        if self.model_freshness_low_s > self.model_freshness_high_s:
            raise ValueError("model_freshness_low_s must be <= model_freshness_high_s")
        if self.critical_relative_drop < self.min_relative_drop:
            raise ValueError("critical_relative_drop must be >= min_relative_drop")
        return self
