"""The `kpi.metrics` loop's handler: the canary judge's decisions and the ranker arm's verdicts,
applied and published.

KPI reports go to the judge of the current (serving, candidate) pair; a decision is applied to
this scorer's registry at once and published on `model.updates`, so every scorer and operator
follows. A routing change starts a fresh comparison. The same reports, per experiment arm, judge
the published ranker on its live arm (serving/ranker_arm.py): a rollback is applied to the
ranker slot and published the same way.
"""

from __future__ import annotations

import threading

from schemas.kpi import KpiReport
from schemas.topics import MODEL_UPDATES
from serving.canary import CanaryJudge, decision_update
from serving.metrics import ServeMetrics
from serving.ranker_arm import RankerArmJudge, rollback_update
from serving.ranker_slot import RankerSlot
from serving.registry import ModelRegistry, Routing
from serving.settings import ServeSettings
from streams.kafka.contract_loop import Envelope, RecordRejected
from streams.kafka.producer import EventProducer


class CanaryDecisions:
    def __init__(
        self,
        settings: ServeSettings,
        registry: ModelRegistry,
        producer: EventProducer,
        metrics: ServeMetrics,
        ranker: RankerSlot | None = None,
    ) -> None:
        self._settings = settings
        self._registry = registry
        self._ranker = ranker
        self.ranker_judge = RankerArmJudge(settings.ranker_arm)
        self._producer = producer
        self._metrics = metrics
        self.judge = CanaryJudge(settings.canary)
        self._lock = threading.Lock()
        """The KPI loop records while the registry's loader thread reports routing changes."""

    def handle(self, batch: list[Envelope[KpiReport]]) -> list[RecordRejected]:
        for envelope in batch:
            self._judge_ranker(envelope.record)
            with self._lock:
                decision = self.judge.record(envelope.record)
            routing = self._registry.snapshot()
            if decision is None or routing.canary is None:
                continue
            if routing.canary.version != decision.candidate:
                continue
            update = decision_update(decision, routing.canary.update, self._settings.canary.kpi)
            self._metrics.canary_decisions.labels(action=decision.action).inc()
            self._registry.apply(update)
            self._producer.send(
                self._settings.kafka.topic(MODEL_UPDATES), update.log_key, update
            )
        return []

    def _judge_ranker(self, report: KpiReport) -> None:
        if self._ranker is None:
            return
        current = self._ranker.current_update()
        self.ranker_judge.watch(current.version if current else None, self._ranker.since)
        verdict = self.ranker_judge.record(report)
        if verdict is None or current is None:
            return
        update = rollback_update(verdict, current)
        self._metrics.ranker_rollbacks.inc()
        self._ranker.apply(update)
        self._producer.send(self._settings.kafka.topic(MODEL_UPDATES), update.log_key, update)

    def routing_changed(self, routing: Routing) -> None:
        self._metrics.routing_changed(routing)
        serving = routing.serving.version if routing.serving else None
        canary = routing.canary
        with self._lock:
            self.judge.watch(serving, canary.version if canary else None,
                             canary.since if canary else 0.0)
