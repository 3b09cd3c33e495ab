"""`streamrec monitor`: the Kafka loop around `MonitorPipeline`.

One consumer reads `rec.responses`, `interactions` and `rec.features` together. Scaling out
needs a user's records in the same instance: the three topics are keyed by user_id, the range
assignor gives one instance partition i of each, which holds while the topics keep equal
partition counts and their producers the same partitioner (librdkafka's default differs from
the Java client's murmur2; set `partitioner=murmur2_random` everywhere or run one instance).

Per batch: decode and fold records in, advance the watermark, publish KPI reports and alerts,
flush (idempotent producer), then commit only what the remaining state no longer needs, with
the bound of the windows already reported (streams.monitor.offsets). Invalid records are counted
and skipped, never retried forever: the stream workers dead-letter invalid interactions, and
the scorer validates what it publishes (the catalog has no `rec.responses.dlq`). Logged features
the monitor cannot use (contract, vectors) are dead-lettered to `rec.features.dlq`; labelled
examples go to `ranker.examples`, flushed with the reports before the commit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from schemas.events import InteractionEvent
from schemas.ranker_examples import ServedFeatures
from schemas.recommendations import RecommendationResponse
from schemas.topics import (
    ALERTS_DRIFT,
    INTERACTIONS,
    KPI_METRICS,
    RANKER_EXAMPLES,
    REC_FEATURES,
    REC_RESPONSES,
)
from schemas.wire import ContractError, decode
from streams.kafka.consumer import BatchConsumer, commit_offsets, committed_offsets
from streams.kafka.deadletter import DeadLetterWriter, SourcePosition
from streams.kafka.producer import EventProducer
from streams.monitor.drift.profiles import FeatureProfile
from streams.monitor.metrics import MonitorMetrics
from streams.monitor.offsets import CommitTracker, commit_metadata, reported_through
from streams.monitor.pipeline import MonitorPipeline, Published, RecordOutcome
from streams.monitor.settings import MonitorSettings

logger = logging.getLogger(__name__)

_LAG_EVERY_S = 15.0
# Co-partitioning: the range assignor gives partition i of both topics to the same instance.
_CO_PARTITIONED: dict[str, Any] = {"partition.assignment.strategy": "range"}


class MonitorService:
    def __init__(
        self,
        settings: MonitorSettings,
        metrics: MonitorMetrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.metrics = metrics or MonitorMetrics()
        self._clock = clock
        reference = (
            FeatureProfile.load(settings.psi_reference_path)
            if settings.psi_reference_path else None
        )
        self.pipeline = MonitorPipeline(settings, reference)
        self.tracker = CommitTracker()
        kafka = settings.kafka
        self._responses_topic = kafka.topic(REC_RESPONSES)
        self._interactions_topic = kafka.topic(INTERACTIONS)
        self._kpi_topic = kafka.topic(KPI_METRICS)
        self._alerts_topic = kafka.topic(ALERTS_DRIFT)
        self._features_topic = kafka.topic(REC_FEATURES)
        self._examples_topic = kafka.topic(RANKER_EXAMPLES)
        self.producer = EventProducer(kafka)
        self.dead_letters = DeadLetterWriter(self.producer, "monitor")
        self._dead_lettered = 0
        self.consumer = BatchConsumer(
            kafka,
            settings.group_id,
            [self._responses_topic, self._interactions_topic, self._features_topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            overrides=_CO_PARTITIONED,
        )
        self._last_lag_export = 0.0
        self._evicted_exported = 0
        self._committed_bound = float("-inf")
        self._failed = False

    def run(self, stop: threading.Event) -> None:
        logger.info(
            "monitor started group=%s responses=%s interactions=%s",
            self.settings.group_id, self._responses_topic, self._interactions_topic,
        )
        try:
            while not stop.is_set():
                self.step()
        except BaseException:
            # Reports of this cycle may be lost with the failure: commit nothing more (not even
            # on the revoke that leaving the group triggers), so the next start re-reads them.
            self._failed = True
            self.consumer.close()
            raise
        self.close()

    def step(self) -> int:
        """One poll-process-publish-commit cycle; returns the number of records read."""
        batch = self.consumer.poll_batch(self.settings.batch_size, self.settings.poll_timeout_s)
        wall = self._clock()
        for message in batch:
            self._fold(message, wall)
        self.tracker.seal()
        self._publish(self.pipeline.advance(wall))
        self._commit()
        self._export_state(wall)
        return len(batch)

    def _fold(self, message: Message, wall: float) -> None:
        topic, partition, offset = _position(message)
        value = message.value()
        event_time = float("-inf")
        outcome: RecordOutcome | str
        source = f"{topic}:{partition}"
        try:
            if topic == self._responses_topic:
                response = decode(RecommendationResponse, value, self.settings.max_future_skew_s)
                outcome = self.pipeline.on_response(response, wall, source)
                event_time = response.served_at
            elif topic == self._features_topic:
                outcome, event_time = self._fold_features(message, wall, source)
            else:
                event = decode(InteractionEvent, value, self.settings.max_future_skew_s)
                outcome = self.pipeline.on_interaction(event, wall, source)
                event_time = event.timestamp
        except ContractError as error:
            outcome = "invalid"
            logger.warning(
                "invalid record skipped topic=%s partition=%d offset=%d error=%s",
                topic, partition, offset, error.kind,
            )
        except Exception:
            # A record that passes its contract yet breaks the pipeline would otherwise stop the
            # monitor at every restart on the same record: it is skipped and counted instead.
            outcome = "invalid"
            logger.exception(
                "record failed and skipped topic=%s partition=%d offset=%d",
                topic, partition, offset,
            )
        if outcome in ("late", "invalid"):
            event_time = float("-inf")  # holds no state
        self.metrics.records.labels(topic, outcome).inc()
        self.tracker.track(topic, partition, offset, event_time)

    def _fold_features(
        self, message: Message, wall: float, source: str
    ) -> tuple[RecordOutcome | str, float]:
        """A logged answer into the labeller, or to `rec.features.dlq` when it is unusable."""
        try:
            record = decode(ServedFeatures, message.value(), self.settings.max_future_skew_s)
            record.matrix()
        except ValueError as error:  # ContractError is one too
            topic, partition, offset = _position(message)
            _, stamp = message.timestamp()
            self.dead_letters.write(
                message.key(), message.value(), error,
                SourcePosition(topic, partition, offset, stamp), stage="validate",
            )
            return "invalid", float("-inf")
        return self.pipeline.on_features(record, wall, source), record.served_at

    def _publish(self, published: Published) -> None:
        for report in published.reports:
            self.producer.send(self._kpi_topic, report.model_version, report)
        for alert in published.alerts:
            self.producer.send(self._alerts_topic, alert.detector, alert)
        for example in published.examples:
            self.producer.send(self._examples_topic, example.user_id, example)
        dead_letters = self.dead_letters.written - self._dead_lettered
        self._dead_lettered = self.dead_letters.written
        if published.reports or published.alerts or published.examples or dead_letters:
            # Before the commit: a crash re-reads what these records came from.
            self.producer.flush()
            logger.info(
                "published reports=%d alerts=%d examples=%d dead_letters=%d",
                len(published.reports), len(published.alerts), len(published.examples),
                dead_letters,
            )
        # Metrics only after the records are acknowledged, so they never count a lost report.
        for report in published.reports:
            self.metrics.report(report)
        for alert in published.alerts:
            self.metrics.alert(alert)
        for feature, value in published.psi.items():
            self.metrics.psi.labels(feature).set(value)

    def _commit(self) -> None:
        bound = self.pipeline.reported_through
        offsets = self.tracker.release(
            self.pipeline.horizon(),
            everything=bound != self._committed_bound,
            metadata=commit_metadata(bound),
        )
        if not offsets:
            return
        if not commit_offsets(self.consumer.raw, offsets):
            return  # the partitions moved: their new owner re-reads from the last commit
        self.tracker.committed(offsets)
        self._committed_bound = bound

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        wall = self._clock()
        for tp in partitions:
            self.pipeline.clock.register(f"{tp.topic}:{tp.partition}", wall)
        bound = reported_through(committed_offsets(consumer, partitions))
        self.pipeline.resume_after(bound)
        # Eager (range) assignment: `partitions` is the whole assignment.
        self.pipeline.windows.source = ",".join(
            sorted(f"{tp.topic}:{tp.partition}" for tp in partitions)
        )
        logger.info("assigned partitions=%d reported_through=%s", len(partitions), bound)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # The new owner re-reads from our last commit: commit what is safe, then let go.
        if not self._failed:
            try:
                self._commit()
            except KafkaException as exc:
                logger.warning("commit on revoke failed error=%s", exc)
        for tp in partitions:
            self.tracker.forget(tp.topic, tp.partition)
            self.pipeline.clock.forget(f"{tp.topic}:{tp.partition}")

    def _export_state(self, wall: float) -> None:
        m, p = self.metrics, self.pipeline
        m.pending.set(len(p.join))
        m.unmatched.set(p.join.unmatched_interactions)
        m.evicted_early.inc(p.join.evicted_early - self._evicted_exported)
        self._evicted_exported = p.join.evicted_early
        watermark = p.clock.watermark(wall)
        if watermark > float("-inf"):
            m.watermark_lag.set(max(0.0, wall - watermark))
        for metric, detector in p.detectors.items():
            m.kpi_estimate.labels(metric).set(detector.estimate)
        for kind, value in p.freshness_p95().items():
            m.freshness.labels(kind).set(value)
        if wall - self._last_lag_export >= _LAG_EVERY_S:
            self._last_lag_export = wall
            self._export_lag()

    def _export_lag(self) -> None:
        consumer = self.consumer.raw
        try:
            assignment = consumer.assignment()
            for tp in consumer.position(assignment):
                _, high = consumer.get_watermark_offsets(tp, timeout=1.0, cached=False)
                lag = high - tp.offset if tp.offset >= 0 else high
                self.metrics.consumer_lag.labels(tp.topic, str(tp.partition)).set(lag)
        except KafkaException as exc:
            logger.warning("lag export failed error=%s", exc)

    def close(self) -> None:
        """Graceful stop: publish nothing partial, flush, commit what is safe, leave the group."""
        try:
            self.producer.flush()
            self._commit()
        finally:
            self.consumer.close()
            logger.info("monitor stopped pending=%d", len(self.pipeline.join))


def _position(message: Message) -> tuple[str, int, int]:
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    if topic is None or partition is None or offset is None:
        raise KafkaException(f"consumed record without a position topic={topic}")
    return topic, partition, offset
