"""Settings of the online trainer (`streamrec train`, `streamrec retrain`)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from models.session_config import SessionTransformerConfig
from online_trainer.vocabulary import VocabularyLimits
from streams.kafka.principals import TRAINER
from streams.service_settings import ServiceSettings


class TrainSettings(ServiceSettings):
    KAFKA_PRINCIPAL: ClassVar[str | None] = TRAINER
    group_id: str = Field("streamrec-trainer", description="Consumer group on `interactions`.")
    start_from: Literal["earliest", "latest"] = Field(
        "earliest", description="Where a partition without a checkpoint position starts."
    )
    model: SessionTransformerConfig = Field(
        default_factory=SessionTransformerConfig,
        description="Architecture and optimiser (STREAMREC_MODEL__DIM=..., etc.).",
    )
    model_name: str = Field("session_transformer", pattern=r"^[a-z0-9_]{1,64}$")
    state_dir: Path = Field(
        Path(".streamrec/trainer"), description="Offset-tied checkpoints of the trainer itself."
    )
    store_dir: Path = Field(
        Path(".streamrec/models"), description="Model store shared with the scorer."
    )
    batch_size: int = Field(512, ge=1, le=100_000, description="Most events per micro-batch.")
    batch_timeout_s: float = Field(
        0.5, gt=0, le=60, description="Longest wait to fill a micro-batch."
    )
    steps_per_batch: int = Field(1, ge=1, le=50, description="Optimiser steps per micro-batch.")
    context_events: int = Field(
        50,
        ge=2,
        description="Recent events per user the trainer scores and learns from "
        "(the scorer reads the last 50 from the feature store).",
    )
    train_context_events: int = Field(
        100,
        ge=2,
        description="Preceding events each new event is learned with. Longer than "
        "context_events on purpose: on ML-100K's second half (prequential HR@10, online over "
        "frozen) 100 gave 1.105x and 200 1.109x against 1.084x for 50; 100 costs half of 200.",
    )
    online_lr: float | None = Field(
        3e-4, gt=0, description="Learning rate of the dense weights while streaming (None: "
        "whatever the optimiser state holds, e.g. the end of an offline schedule). Single "
        "micro-batches must not pull the shared encoder around: HR@10 online over frozen on "
        "the first 20k streamed ML-100K events was 1.03x at 1e-4, 1.04x at 3e-4, 1.02x at 1e-3.",
    )
    online_item_lr: float | None = Field(
        1e-3, gt=0, description="Learning rate of the item table and biases while streaming: "
        "the sparse rows are where new items and shifting popularity live (same measure: "
        "1.04x at 1e-3, 1.01x at 2e-3; the offline schedule leaves ~3e-5: 1.01x).",
    )
    scored_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Share of events the prequential evaluation scores, with the candidate "
        "and, for the gate, the serving model; a hash of the event picks them. Scoring is per "
        "event while learning is per user, so the share bounds most of the trainer's cost.",
    )
    publish_every_s: float = Field(
        0.5, gt=0, description="Shortest time from the end of one publication to the next: "
        "a candidate is gated as soon as it learned new events, this long has passed and the "
        "gate holds gate_min_events held-out events it has not decided on. Every publication "
        "is a version the scorers load (superseded ones are skipped), so this bounds their "
        "load rate.",
    )
    checkpoint_every_batches: int = Field(
        20, ge=1, description="Offset-tied checkpoint cadence, in micro-batches, of the session "
        "model and of the ranker, each counting its own (a publication also checkpoints).",
    )
    gate_metric: str = Field("ndcg@10", description="Metric the validation gate compares.")
    gate_margin: float = Field(
        0.002, ge=0, le=1, description="A candidate may be this much worse and still publish."
    )
    gate_window_events: int = Field(
        2_000, ge=10, description="Held-out window: the most recent events, scored before training."
    )
    gate_min_events: int = Field(200, ge=1, description="No decision on fewer held-out events.")
    publish_stage: Literal["serving", "candidate"] = Field(
        "serving",
        description="`candidate` hands each gated version to the scorers' canary, which promotes "
        "or rolls it back on live KPIs; `serving` switches every scorer at once.",
    )
    full_publish_share: float = Field(
        0.5, gt=0, le=1, description="Publish a full checkpoint when more rows than this changed."
    )
    max_users: int = Field(
        1_000_000, ge=1, description="Users whose recent history is kept (least recent evicted)."
    )
    item_min_count: int = Field(
        1, ge=1, le=1_000, description="Sightings of an item id before it gets a model row; "
        "until then its events are neither history nor training target, so a flood of one-off "
        "ids costs no rows. 1 admits on first sight.",
    )
    item_max_rows: int = Field(
        1_000_000, ge=1, le=100_000_000, description="Most item ids holding a model row (and "
        "most rarer ids whose sightings are counted). When full, admitting an id recycles the "
        "row of the least recently seen one with fresh weights and optimiser state; the evicted "
        "id leaves the published id map. The table is ~4 * (dim + 3) bytes per row, weights "
        "and AdamW moments included, e.g. 0.5 GB at 1M rows of dim 128.",
    )
    threads: int = Field(0, ge=0, description="torch CPU threads; 0 keeps torch's default.")
    retrain_window_s: float = Field(
        90 * 24 * 3600.0, gt=0, description="History a full retrain replays from Kafka."
    )
    retrain_min_after_change_s: float | None = Field(
        None, ge=0, description="Set: when a drift alert dates its change, the retrain replays "
        "only events since the change and starts once this many seconds of them exist. "
        "None: the alert's change time is ignored and the whole window replayed at once."
    )
    archive_dir: Path | None = Field(
        None, description="Root of the window archive (`streamrec archive` writes it): set, a "
        "full retrain reads its window from there and replays only the newer tail from Kafka. "
        "None: the whole window is replayed from Kafka.",
    )
    archive_workers: int = Field(4, ge=1, le=64, description="Threads reading archive files.")
    retrain_budget_s: float = Field(300.0, gt=0, description="Wall-clock cap of a full retrain.")
    retrain_gate: bool = Field(
        True, description="A drift retrain is published only when its NDCG@10 on its own "
        "validation queries (each user's last event of the window) is at least the serving "
        "version's on the same queries; otherwise the alert is settled and the serving version "
        "keeps serving and learning. False: every drift retrain is published.",
    )
    retrain_mode: Literal["scratch", "warm"] = Field(
        "scratch", description="Full retrain from a fresh initialisation or from current weights."
    )
    alerts_group_id: str = Field("streamrec-trainer-alerts", description="Group on alerts.drift.")
    ranker_enabled: bool = Field(
        True, description="Train the ranker on ranker.examples and publish it through its gate."
    )
    ranker_group_id: str = Field(
        "streamrec-trainer-ranker", description="Group on ranker.examples (positions come from "
        "the ranker's checkpoint, not from the group's committed offsets).",
    )
    ranker_held_back: int = Field(
        1000, ge=10, le=100_000, description="Most recent held-back lists (see "
        "ranker_held_back_every) the gate judges on; a list trains once it leaves them.",
    )
    ranker_held_back_every: int = Field(
        5, ge=1, le=1000, description="One labelled list in this many (by a hash of its "
        "request id) joins the held-back set the gate judges on; the others train at once.",
    )
    ranker_gate_every: int = Field(
        10, ge=1, le=100_000, description="Micro-batches of ranker.examples between gate runs."
    )
    ranker_min_gain: float = Field(
        0.0, ge=0.0, le=1.0, description="Graded NDCG@10 a ranker must gain over retrieval "
        "order on the held-back lists (besides 2.5 standard errors) to be published.",
    )
    ranker_min_lists: int = Field(
        50, ge=2, le=100_000, description="Held-back lists with a positive grade the gate "
        "needs before it may promote.",
    )
    alert_max_age_s: float = Field(
        600.0, gt=0, description="How far back a new alerts group starts reading (an existing "
        "group resumes at its commit, so an alert still pending is read again however old)."
    )
    retrain_retry_s: float = Field(
        300.0, ge=0, description="After a failed drift retrain, wait this long and retrain "
        "again; its alerts stay pending meanwhile."
    )

    def item_limits(self) -> VocabularyLimits:
        return VocabularyLimits(self.item_min_count, self.item_max_rows)
