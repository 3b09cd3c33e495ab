"""Configuration of the scorer (`streamrec serve`), read once from STREAMREC_* variables."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from models.retrieval import RetrievalConfig
from serving.experiment import Experiment
from serving.rules import BusinessRules
from streams.kafka.principals import SCORER
from streams.service_settings import ServiceSettings

CpuRuntime = Literal["onnxruntime", "torchscript"]


class CanaryPolicy(BaseModel):
    """When a candidate version is promoted or rolled back (KPI guardrails)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    share: float = Field(0.1, ge=0.0, le=1.0, description="Share of users the canary serves.")
    kpi: str = Field(
        "hit_rate_at_k", pattern=r"^(hit_rate_at_k|ctr|conversion_rate)$",
        description="The KPI compared between candidate and serving version.",
    )
    min_responses: int = Field(
        200, ge=1, description="Attributed responses each version needs before any decision."
    )
    max_regression: float = Field(
        0.05, ge=0.0, le=1.0,
        description="Roll back when the candidate is worse than serving by more than this "
        "share of the serving KPI.",
    )
    min_uplift: float = Field(
        0.0, ge=-1.0, le=1.0,
        description="Promote when the candidate's relative change is at least this.",
    )


class RankerArmPolicy(BaseModel):
    """When the published ranker is rolled back on its live experiment arm
    (serving/ranker_arm.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ranker_arm: str = Field("ranker", min_length=1, description="The arm the ranker orders.")
    model_arm: str = Field(
        "model", min_length=1, description="The arm of the same live version in retrieval order."
    )
    min_responses: int = Field(
        1000, ge=1, description="Attributed responses each arm needs before any verdict."
    )
    z: float = Field(
        1.96, gt=0.0, description="Roll back when the ranker arm's hit rate is below the model "
        "arm's with a z statistic at most -z (each arm's variance clustered by user bucket).",
    )


class ServeSettings(ServiceSettings):
    KAFKA_PRINCIPAL: ClassVar[str | None] = SCORER
    REDIS_USER: ClassVar[str | None] = "scorer"
    # The scorer logs in as its own read-only ACL user.
    group_id: str = Field("streamrec-scorer", min_length=1, max_length=128)
    requests_offset_reset: Literal["earliest", "latest"] = Field(
        "latest", description="Where a brand-new scorer group starts: stale requests from "
        "before the first scorer came up are not worth answering late.",
    )
    instance_id: str = Field(
        "", max_length=64, description="Names this scorer's private consumer groups; "
        "empty = host and process id."
    )
    model_name: str = Field(
        "session_transformer", min_length=1, max_length=128,
        description="The model the online trainer publishes (online_trainer settings).",
    )
    ranker_name: str = Field(
        "ranker", min_length=1, max_length=128,
        description="The ranker the online trainer publishes once the gate promotes one.",
    )
    model_store: Path = Field(Path(".streamrec/models"), description="ModelStore root.")
    batch_size: int = Field(64, ge=1, le=5000, description="Most requests per micro-batch.")
    batch_fill_ms: float = Field(
        3.0, ge=0, le=1000, description="After the first request of a batch, how long to wait "
        "for more; 0 takes only those already queued (under load, those that arrived while the "
        "previous batch was scored). A batch has a fixed cost (encoder call, Redis round trip, "
        "index search) that runs with cold caches after each wait, so at high rates a short "
        "fill saves CPU per request and lowers the tail (serving/batch_fill.py).",
    )
    batch_fill_min_expected: float = Field(
        0.5, ge=0, le=1000, description="Wait the fill only while the last second's arrival "
        "rate makes at least this many more requests within it likely (3 ms: from ~170 req/s); "
        "below, a request never waits for company. 0 always waits.",
    )
    commit_interval_ms: float = Field(
        100.0, ge=0, le=10_000, description="Answered requests are flushed and committed at "
        "most this often (0: after every micro-batch). A crash re-delivers at most this much "
        "of already answered requests (duplicate answers, same request_id); none is lost.",
    )
    candidates: int = Field(300, ge=1, le=5000, description="Retrieved per request.")
    logged_candidates: int = Field(
        100, ge=0, le=500, description="Candidates per model-served answer whose ranking "
        "features go to rec.features (the ranker's training data once labelled); 0 logs none.",
    )
    catalog_catch_up_s: float = Field(
        120.0, ge=0, le=3600, description="Longest wait at start for the scorer to read "
        "catalog.items to its end before it consumes requests; past it, it serves with the "
        "metadata read so far and reads the rest meanwhile.",
    )
    model_catch_up_s: float = Field(
        120.0, ge=0, le=3600, description="Longest wait at start for the scorer to read "
        "model.updates to its end and load the versions it names before it consumes requests "
        "(so no answer comes from a version the log has rolled back); past it, it answers "
        "with what is loaded (popularity while nothing is) and loads the rest meanwhile.",
    )
    new_item_slots: int = Field(
        1, ge=0, le=100, description="Last places of each model answer given to catalog items "
        "the serving version does not know yet (published to catalog.items since it was "
        "trained, or never interacted with), those whose genres best match the user's recent "
        "items; 0 gives none. A place stays with the model when no such item shares a genre.",
    )
    item_state_refresh_ms: float = Field(
        250.0, gt=0, le=60_000, description="How often the scorer re-reads the state (first "
        "and last interaction time, event count) of the items Redis reports written, for the "
        "ranking stage's features: a candidate's state is at most about this old.",
    )
    item_state_reads_per_s: float = Field(
        10_000.0, gt=0, le=1_000_000, description="Pace of the scorer's full re-reads of every "
        "item's state, at start and after its connection to Redis was lost (a write may have "
        "gone unseen). Each item costs Redis one HMGET and the scorer a few microseconds.",
    )
    popularity_candidates: int = Field(
        500, ge=1, le=5000, description="Items of each popularity shard's top list read for "
        "cold-start answers (users with no history).",
    )
    config_refresh_s: float = Field(
        1.0, gt=0, le=3600, description="Refresh of unavailable items, rules and the recent "
        "popularity lists from Redis.",
    )
    redis_read_spin_us: float = Field(
        150.0, ge=0, le=5000, description="How long the per-batch Redis read polls for its "
        "reply before it blocks: Redis usually answers within tens of microseconds, and a "
        "blocking wait (sleep and wake-up) costs more CPU than that. 0 blocks at once.",
    )
    history_length: int = Field(
        50, ge=1, le=1000, description="Newest events of the history a version reads that it "
        "encodes (models/query_history.py); keep it equal to the trainer's context_events and "
        "to the feature workers' sequence length, so a query is what the trainer scores.",
    )
    torch_threads: int = Field(
        1, ge=1, le=64, description="Threads of the session encoder's inference: micro-batches "
        "are small, and more threads contend with the scorer's other work for the cores.",
    )
    encoder_cpu_runtime: CpuRuntime = Field(
        "onnxruntime", description="What runs the session encoder on CPU: an ONNX Runtime "
        "session (falls back to the trace when it cannot be built or disagrees) or the "
        "TorchScript trace. Ignored on CUDA (graph replays).",
    )
    retrieval: RetrievalConfig = Field(
        # IVF, not HNSW: every hot swap rebuilds the index, and on one core IVF trains on 100k
        # items in ~2 s where HNSW takes 20-60 s; a search of 300 costs ~0.15 ms. Below
        # exact_threshold items the index is flat: exact, as the offline reference ranks (IVF's
        # 12 probes of ML-100K's 43 lists would miss part of a version's top items).
        default_factory=lambda: RetrievalConfig(
            kind="ivf", ivf_lists_per_sqrt=2.0, ivf_nprobe=12, threads=1, exact_threshold=5_000
        ),
        description="The candidate index: exact (flat) below `exact_threshold` items, `kind` "
        "above.",
    )
    rules: BusinessRules = Field(
        default_factory=BusinessRules,
        description="Static rules; a JSON document at Redis key <prefix>cfg:{serving}:rules "
        "replaces them while present.",
    )
    canary: CanaryPolicy = Field(default_factory=CanaryPolicy)
    ranker_arm: RankerArmPolicy = Field(default_factory=RankerArmPolicy)
    experiment: Experiment = Field(
        default_factory=Experiment,
        description="The user-level experiment: its name and arms (STREAMREC_EXPERIMENT__ARMS="
        "'[{\"name\": \"model\", \"policy\": \"model\", \"weight\": 1}, ...]'). A JSON "
        "document at Redis key <prefix>cfg:{serving}:experiment replaces it while present.",
    )
