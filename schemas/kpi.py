"""KPI windows on `kpi.metrics`, keyed by model version and experiment arm."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from schemas.fields import INTEGRAL, STRICT_RECORD, Count, Id, Rate, SchemaVersion3, Timestamp
from schemas.limits import MAX_K


class KpiReport(BaseModel):
    model_config = STRICT_RECORD

    schema_version: SchemaVersion3 = 3
    report_id: Id
    """The same for every publication of one window's counts (a monitor that restarts after
    publishing and before committing publishes them again): consumers count each id once."""
    model_version: Id
    experiment: Id | None = None
    """The experiment the counted responses name (None: responses outside any experiment)."""
    arm: Id | None = None
    """The experiment arm that answered the counted responses: one report per version and arm,
    so each arm's KPI is read on its own randomly assigned users."""
    window_start: Timestamp
    window_end: Timestamp
    k: Annotated[int, Field(ge=1, le=MAX_K), INTEGRAL]
    responses: Count
    hits: Count
    clicks: Count
    conversions: Count
    hit_rate_at_k: Rate
    ctr: Rate
    conversion_rate: Rate
