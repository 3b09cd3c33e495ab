"""The `kpi.metrics` loop's handler: the canary judge's decisions, applied and published.

KPI reports go to the judge of the current (serving, candidate) pair; a decision is applied to
this scorer's registry at once and published on `model.updates`, so every scorer and operator
follows. A routing change starts a fresh comparison.
"""

from __future__ import annotations

import threading

from schemas.kpi import KpiReport
from schemas.topics import MODEL_UPDATES
from serving.canary import CanaryJudge, decision_update
from serving.metrics import ServeMetrics
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
    ) -> None:
        self._settings = settings
        self._registry = registry
        self._producer = producer
        self._metrics = metrics
        self.judge = CanaryJudge(settings.canary)
        self._lock = threading.Lock()
        """The KPI loop records while the registry's loader thread reports routing changes."""

    def handle(self, batch: list[Envelope[KpiReport]]) -> list[RecordRejected]:
        for envelope in batch:
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
                self._settings.kafka.topic(MODEL_UPDATES), update.model_name, update
            )
        return []

    def routing_changed(self, routing: Routing) -> None:
        self._metrics.routing_changed(routing)
        serving = routing.serving.version if routing.serving else None
        canary = routing.canary
        with self._lock:
            self.judge.watch(serving, canary.version if canary else None,
                             canary.since if canary else 0.0)
