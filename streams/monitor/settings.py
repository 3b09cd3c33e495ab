"""`MonitorSettings`: how `streamrec monitor` runs (env prefix STREAMREC_, e.g. STREAMREC_K=20)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field

from streams.kafka.principals import MONITOR
from streams.monitor.drift.config import DriftSettings
from streams.service_settings import ServiceSettings


class MonitorSettings(ServiceSettings):
    KAFKA_PRINCIPAL: ClassVar[str | None] = MONITOR
    metrics_port: int = Field(
        9304, ge=0, le=65535, description="Prometheus /metrics port; 0 disables it."
    )
    group_id: str = Field("streamrec-monitor", min_length=1, description="Kafka consumer group.")
    k: int = Field(10, ge=1, le=500, description="Only the top k items of a response can be hits.")
    attribution_window_s: float = Field(
        1800.0,
        gt=0.0,
        le=7 * 24 * 3600.0,
        description="An interaction up to this long after served_at counts for the response.",
    )
    window_s: float = Field(
        300.0, gt=0.0, le=24 * 3600.0, description="Tumbling KPI window length (by served_at)."
    )
    allowed_lateness_s: float = Field(
        30.0,
        ge=0.0,
        le=3600.0,
        description="Event-time slack for out-of-order records before the watermark passes them.",
    )
    idle_advance_s: float = Field(
        10.0,
        gt=0.0,
        description=(
            "With no records for this long, event time is assumed to advance with the wall "
            "clock, so windows still close when traffic stops."
        ),
    )
    max_pending_responses: int = Field(
        500_000,
        ge=100,
        le=50_000_000,
        description="Responses awaiting attribution; beyond it the oldest are finalised early.",
    )
    batch_size: int = Field(2_000, ge=1, le=100_000, description="Records per consumer poll.")
    poll_timeout_s: float = Field(
        0.5, gt=0.0, le=30.0,
        description="Longest wait for a batch to fill; also how often the watermark advances "
        "without records.",
    )
    commit_interval_s: float = Field(
        1.0, gt=0.0, le=60.0,
        description="How often faust commits the offsets of processed batches (after flushing "
        "their outputs and state changes).",
    )
    psi_reference_path: Path | None = Field(
        None,
        description=(
            "Training reference profile (a drift.profiles.FeatureProfile as JSON). Without one,"
            " the first PSI sample of live traffic becomes the reference."
        ),
    )
    drift: DriftSettings = Field(default_factory=DriftSettings)
