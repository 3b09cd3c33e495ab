"""`DemoSettings`: one scenario of the live demo (env prefix STREAMREC_DEMO__, e.g.
STREAMREC_DEMO__EVENTS_PER_S=150). The end-to-end test builds a shorter one in code."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from streams.service_settings import refuse_unknown, unknown_variables


class DemoSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="STREAMREC_DEMO__", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    @model_validator(mode="before")
    @classmethod
    def _no_unknown_variables(cls, data: Any) -> Any:
        prefix = str(cls.model_config.get("env_prefix"))
        refuse_unknown(unknown_variables(prefix, cls.model_fields, True), "demo")
        return data

    reports_dir: Path = Field(
        Path("reports"), description="Each run writes demo-<timestamp>/ here (git-ignored)."
    )
    interactions: Path | None = Field(
        None, description="CSV with header user_id,item_id,timestamp (seconds) replayed "
        "instead of ML-100K (deploy/demo/dataset.py); its items have no content in the "
        "catalog. None: ML-100K.",
    )
    pretrain_share: float = Field(
        0.5, gt=0.0, lt=1.0,
        description="First share of the dataset (by time): pre-training and backfill.",
    )
    pretrain_budget_s: float = Field(25.0, gt=0.0, le=3600.0, description="Pre-training cap.")
    pretrain_epochs: int | None = Field(
        None, ge=1, le=200, description="Pre-training passes over the first part, the "
        "learning-rate schedule laid out over them (pretrain_budget_s stays the cap). None: the "
        "model configuration's passes, cut by the time cap.",
    )
    events_per_s: float = Field(80.0, gt=0.0, le=5000.0, description="Live replay rate.")
    request_share: float = Field(
        0.6, gt=0.0, le=1.0,
        description="Share of live events preceded by a recommendation request.",
    )
    user_gap_s: float | None = Field(
        0.25, ge=0.0, le=10.0, description="User-paced replay "
        "(deploy/generators/replay_schedule.py): a user's next request leaves at least this "
        "long after their previous event was published, and not before the feature store "
        "holds that event. None: every request at its slot, when a bursting user's request is "
        "answered from a history dozens of events old (docs/architecture.md, \"What makes "
        "learned answers lose on a time-ordered replay\").",
    )
    user_store_wait_s: float = Field(
        10.0, gt=0.0, le=60.0, description="User-paced replay: a user's request also waits "
        "until the feature store holds their previous event, at most this long (then it "
        "leaves, counted as `unstored`).",
    )
    experiment: bool = Field(
        True, description="The scorer runs a user-level experiment (deploy/demo/arms.py): "
        "popularity, frozen (the pre-trained version pinned, then the drift retrain's), model "
        "and ranker, equal shares. False: one policy for everyone (the published ranker).",
    )
    live_events: int | None = Field(
        None, ge=1, description="Most events of the second part replayed live; None: all."
    )
    request_lead_s: float = Field(
        0.5, gt=0.0, le=10.0,
        description="A request leaves this long before the interaction it precedes (the user "
        "looks at the list, then acts); later responses do not credit the interaction.",
    )
    warmup_s: float = Field(
        30.0, ge=0.0, description="Live seconds before the KPI baseline counts."
    )
    drift_after_s: float | None = Field(
        80.0, gt=0.0, description="Live seconds before the shift; None: no shift."
    )
    max_live_s: float = Field(420.0, gt=0.0, le=3600.0, description="Hard cap of the live phase.")
    recovery_settle_s: float = Field(
        30.0, ge=0.0, description="After the retrained major version is published: the scorer "
        "loads it and user histories refill with the new item ids; not counted as recovered.",
    )
    recovery_hold_s: float = Field(
        60.0, gt=0.0, description="Then the hit rate over this long is the recovered level; "
        "recovered = at least recovery_ratio of the pre-drift level.",
    )
    recovery_ratio: float = Field(0.9, gt=0.0, le=2.0)
    drift_item_share: float = Field(
        1.0, gt=0.0, le=1.0, description="Share of item ids permuted among themselves at the shift."
    )
    popularity_bucket_s: int = Field(
        60, ge=10, le=3600, description="The feature worker's popularity bucket. A run lasts "
        "minutes, not days: with hourly buckets the cold-start list would still count the "
        "items of before the shift for the rest of the run.",
    )
    seed: int = 7
    kpi_window_s: float = Field(5.0, gt=0.0, le=600.0, description="Monitor KPI window.")
    attribution_window_s: float = Field(4.0, gt=0.0, le=600.0)
    retrain_window_s: float = Field(
        120.0, gt=0.0, description="Most history a drift retrain replays. A KPI alert dates "
        "its change, and then only the events since the change are replayed.",
    )
    retrain_after_change_s: float = Field(
        90.0, ge=0.0, description="The retrain starts once this much of the new regime exists. "
        "The alert comes ~15-20 s after the shift, when a fixed window would still be mostly "
        "pre-shift data; what the retrained version knows of the new regime's users and items "
        "is what these seconds held (~6,000 events at the user-paced rate).",
    )
    retrain_mode: Literal["scratch", "warm"] = Field(
        "scratch", description="After a shift the old item embeddings point at the wrong items, "
        "and a warm start has to unlearn them first; a fresh start (co-occurrence "
        "initialisation on the new regime) learns the new regime faster.",
    )
    retrain_budget_s: float = Field(20.0, gt=0.0, le=3600.0)
    online_publish_every_s: float = Field(
        10.0, gt=0.0, description="Cadence of the online trainer's gated minor publications: "
        "what the `model` arm serves beyond the `frozen` one.",
    )
    ranker_held_back: int = Field(
        2000, ge=10, le=100_000, description="Recent held-back lists the ranker gate judges "
        "on (one labelled list in five is held back; the others train at once). A ranker that "
        "gains a few percent needs about this many before its gain clears the gate's 2.5 "
        "standard errors; at the demo's rates they span the last two minutes or so.",
    )
    ranker_min_lists: int = Field(
        50, ge=2, le=100_000, description="Positive held-back lists before the gate may "
        "promote: enough for its two-standard-error test to mean something on a small "
        "catalogue, few enough to be reached within the first minute of live traffic.",
    )
    ranker_gate_every: int = Field(
        20, ge=1, le=100_000, description="Micro-batches of ranker.examples between gate "
        "runs (at least 10 s at the trainer's 0.5 s batch timeout, longer while the trainer is "
        "busy): several gate decisions before and after the drift.",
    )
    dashboard: bool = Field(True, description="rich.Live terminal dashboard.")
    refresh_s: float = Field(1.0, gt=0.0, le=10.0, description="Dashboard and sampling cadence.")
    ready_timeout_s: float = Field(180.0, gt=0.0, description="Wait for services to answer.")
