"""KPI windows on `kpi.metrics`, keyed by model version: one report per window, model version
and experiment arm. What a hit is: schemas/hits.py."""

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
    """The experiment of the answers counted here; None for answers served outside one."""
    arm: Id | None = None
    """Their experiment arm; None for answers served outside an experiment."""
    window_start: Timestamp
    window_end: Timestamp
    k: Annotated[int, Field(ge=1, le=MAX_K), INTEGRAL]
    responses: Count
    hits: Count
    """Window hits: answers with an act on a top-k item within the attribution window."""
    strict_hits: Count
    """Strict hits: answers whose user's next act was on a top-k item."""
    clicks: Count
    conversions: Count
    hit_rate_at_k: Rate
    """hits / responses (the window hit rate@k)."""
    strict_hit_rate_at_k: Rate
    ndcg_at_10: Rate
    """Mean NDCG@10 of the next act's item over the responses."""
    ctr: Rate
    conversion_rate: Rate
