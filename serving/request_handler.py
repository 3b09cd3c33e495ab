"""The requests loop's handler: a batch of valid requests scored, answered and logged.

Each request gets one response on `rec.responses`; a model answer's ranking-stage input follows
it on `rec.features` (after the response: labels come from what happens once the answer is
out). When scoring the batch fails, its requests are scored one at a time, so one bad request
cannot take its companions down with it; a request that still fails gets an internal-error
answer and is dead-lettered.
"""

from __future__ import annotations

import logging
import time

from schemas.recommendations import RecommendationRequest
from serving.metrics import ServeMetrics
from serving.pipeline import Scorer
from serving.responses import error_response
from serving.stages.ordering import Answer
from streams.kafka.contract_loop import Envelope, RecordRejected
from streams.kafka.producer import EventProducer

logger = logging.getLogger(__name__)


class RequestHandler:
    def __init__(
        self,
        scorer: Scorer,
        producer: EventProducer,
        responses_topic: str,
        features_topic: str,
        metrics: ServeMetrics,
    ) -> None:
        self._scorer = scorer
        self._producer = producer
        self._responses_topic = responses_topic
        self._features_topic = features_topic
        self._metrics = metrics

    def handle(self, batch: list[Envelope[RecommendationRequest]]) -> list[RecordRejected]:
        try:
            answers: list[Answer | BaseException] = list(
                self._scorer.score_batch([e.record for e in batch])
            )
        except Exception:
            logger.exception("batch scoring failed size=%d; retrying one by one", len(batch))
            answers = [self._score_one(e) for e in batch]
        rejected = []
        for envelope, answer in zip(batch, answers, strict=True):
            request = envelope.record
            if isinstance(answer, BaseException):
                experiment, arm = self._scorer.arm(request.user_id)
                response = error_response(
                    request.request_id, request.user_id, "internal", answer, time.time(),
                    (experiment.name, arm.name),
                )
                self._producer.send(self._responses_topic, request.user_id, response)
                self._metrics.requests.labels(outcome="internal_error").inc()
                self._metrics.answered(response)
                rejected.append(RecordRejected(envelope, answer))  # type: ignore[arg-type]
                continue
            self._producer.send(self._responses_topic, request.user_id, answer.response)
            if answer.features is not None:
                self._producer.send(self._features_topic, request.user_id, answer.features)
            self._metrics.requests.labels(outcome=answer.outcome).inc()
            self._metrics.new_items.inc(answer.new_items)
            self._metrics.answered(answer.response)
        return rejected

    def _score_one(self, envelope: Envelope[RecommendationRequest]) -> Answer | BaseException:
        try:
            return self._scorer.score_batch([envelope.record])[0]
        except Exception as error:
            logger.error(
                "scoring failed request_id=%s error=%s",
                envelope.record.request_id, type(error).__name__,
            )
            return error
