"""Reads what the services publish (rec.responses, kpi.metrics, alerts.drift, model.updates) on
a background thread, the way an application and an operator would: from Kafka, not from memory."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Message
from pydantic import BaseModel

from schemas import DriftAlert, KpiReport, ModelUpdate, RecommendationResponse
from schemas.topics import ALERTS_DRIFT, KPI_METRICS, MODEL_UPDATES, REC_RESPONSES
from schemas.wire import ContractError, decode
from streams.kafka.connection import KafkaConnection

logger = logging.getLogger(__name__)

_MAX_WAITING_RESPONSES = 100_000
"""Responses nobody claimed (late or unknown) are forgotten oldest first beyond this."""


@dataclass(frozen=True)
class Answer:
    response: RecommendationResponse
    received_at: float


@dataclass
class Observed:
    kpis: list[KpiReport] = field(default_factory=list)
    alerts: list[DriftAlert] = field(default_factory=list)
    updates: list[ModelUpdate] = field(default_factory=list)
    responses: int = 0
    invalid: int = 0


class Observer:
    def __init__(self, kafka: KafkaConnection, group_id: str) -> None:
        self._topics: dict[str, type[BaseModel]] = {
            kafka.topic(REC_RESPONSES): RecommendationResponse,
            kafka.topic(KPI_METRICS): KpiReport,
            kafka.topic(ALERTS_DRIFT): DriftAlert,
            kafka.topic(MODEL_UPDATES): ModelUpdate,
        }
        self._consumer = Consumer(
            {**kafka.client_config(), "group.id": group_id, "auto.offset.reset": "earliest",
             "enable.auto.commit": False}
        )
        self._consumer.subscribe(list(self._topics))
        self._lock = threading.Lock()
        self._answers: OrderedDict[str, Answer] = OrderedDict()
        self.observed = Observed()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="observer", daemon=True)

    def start(self) -> Observer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._consumer.close()

    def take(self, request_id: str) -> Answer | None:
        """The response to a request, once (None while it has not arrived)."""
        with self._lock:
            return self._answers.pop(request_id, None)

    def snapshot(self) -> Observed:
        with self._lock:
            o = self.observed
            return Observed(list(o.kpis), list(o.alerts), list(o.updates), o.responses, o.invalid)

    def _run(self) -> None:
        while not self._stop.is_set():
            # The first record as soon as it arrives, then only what is already queued: waiting
            # for a batch to fill would be counted as the scorer's latency.
            messages = self._consumer.consume(1, 0.2)
            if messages:
                messages += self._consumer.consume(499, 0)
            now = time.time()
            for message in messages:
                if message.error() is None:
                    self._handle(message, now)

    def _handle(self, message: Message, now: float) -> None:
        model = self._topics.get(message.topic() or "")
        if model is None or message.value() is None:
            # A tombstone retires a version's key in `model.updates` (schemas/model_log.py).
            return
        try:
            record: BaseModel = decode(model, message.value())
        except ContractError as exc:
            logger.warning("invalid record topic=%s kind=%s", message.topic(), exc.kind)
            self.observed.invalid += 1
            return
        with self._lock:
            self._store(record, now)

    def _store(self, record: object, now: float) -> None:
        o = self.observed
        if isinstance(record, RecommendationResponse):
            o.responses += 1
            self._answers[record.request_id] = Answer(record, now)
            while len(self._answers) > _MAX_WAITING_RESPONSES:
                self._answers.popitem(last=False)
        elif isinstance(record, KpiReport):
            o.kpis.append(record)
        elif isinstance(record, DriftAlert):
            o.alerts.append(record)
        elif isinstance(record, ModelUpdate):
            o.updates.append(record)
