"""Prometheus metrics of the online trainer."""

from __future__ import annotations

import math
import time

from prometheus_client import Counter, Gauge, Histogram

from models.logged_ranker import GateDecision as RankerGateDecision
from online_trainer.gate import GateDecision
from online_trainer.prequential import RunningMetrics
from online_trainer.publisher import Publication

_EVENTS = Counter("streamrec_trainer_events_total", "Events trained on.")
_BATCH_SECONDS = Histogram(
    "streamrec_trainer_batch_seconds",
    "Score + learn time per micro-batch.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
_LOSS = Gauge("streamrec_trainer_loss", "Training loss of the last micro-batch.")
_PREQ = Gauge(
    "streamrec_trainer_prequential", "Prequential metric over the recent window.", ["metric"]
)
_GATE = Counter("streamrec_trainer_gate_decisions_total", "Gate decisions.", ["outcome"])
_RETRAINS = Counter(
    "streamrec_trainer_retrain_decisions_total",
    "Drift retrains published, or refused because the serving version scored better on their "
    "validation queries.", ["outcome"],
)
_PUBLISHED = Counter("streamrec_trainer_publications_total", "Published versions.", ["kind"])
_FRESHNESS = Histogram(
    "streamrec_trainer_model_freshness_seconds",
    "Event ingested -> a published, loadable model contains it.",
    buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300),
)
_RANKER_GATE = Counter(
    "streamrec_trainer_ranker_gate_decisions_total",
    "Ranker gate decisions (promoted versions are also announced on model.updates; refusals "
    "only here and in the log).",
    ["outcome"],
)
for _outcome in ("promote", "refuse"):
    _RANKER_GATE.labels(_outcome)  # both outcomes are exported from the start, at 0
_RANKER_GAIN = Gauge(
    "streamrec_trainer_ranker_gate_gain",
    "Held-back graded NDCG@10 of the ranker minus retrieval order at the last gate run.",
)
_VERSION = Gauge("streamrec_trainer_serving_version_info", "Last published version.", ["version"])
_REJECTED = Counter(
    "streamrec_trainer_loads_rejected_total",
    "What the trainer refused to resume from, by what (its checkpoint, the serving version it "
    "announced) and reason (bytes that differ from the recorded digest, files outside the "
    "store, missing files).",
    ["what", "reason"],
)


class TrainerMetrics:
    """Thin facade so the trainer's logic reads as logic."""

    def observe_batch(
        self, events: int, seconds: float, loss: float, running: RunningMetrics
    ) -> None:
        _EVENTS.inc(events)
        _BATCH_SECONDS.observe(seconds)
        if not math.isnan(loss):
            _LOSS.set(loss)
        for name, value in running.recent().items():
            if name != "events":
                _PREQ.labels(name).set(value)

    def observe_gate(self, decision: GateDecision) -> None:
        _GATE.labels("publish" if decision.publish else "hold").inc()

    def observe_ranker_gate(self, decision: RankerGateDecision) -> None:
        _RANKER_GATE.labels("promote" if decision.promote else "refuse").inc()
        gain = decision.ranker_ndcg - decision.retrieval_ndcg
        if not math.isnan(gain):
            _RANKER_GAIN.set(gain)

    def observe_retrain(self, publish: bool) -> None:
        _RETRAINS.labels(outcome="publish" if publish else "refuse").inc()

    def observe_rejected(self, what: str, error: BaseException) -> None:
        _REJECTED.labels(what, type(error).__name__).inc()

    def observe_publication(self, publication: Publication, ingest_times: list[float]) -> None:
        _PUBLISHED.labels(publication.kind).inc()
        now = time.time()
        for ingested in ingest_times:
            _FRESHNESS.observe(max(0.0, now - ingested))
        _VERSION.clear()
        _VERSION.labels(publication.version).set(1)
