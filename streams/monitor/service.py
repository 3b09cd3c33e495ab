"""`streamrec monitor`: a faust app (streams/kafka/faust_app.py) around `MonitorPipeline`.

One batch handler (`consume_batches`) reads `rec.responses`, `interactions` and `rec.features`
together, a fetch at a time. The three topics are keyed by user_id with equal partition counts,
and faust's assignor gives one worker partition i of each, so a user's records meet in one
worker (their producers must share a partitioner: librdkafka's default differs from the Java
client's murmur2; set `partitioner=murmur2_random` everywhere or run one worker). No
repartition topic is needed.

Per batch: decode (through the contracts' msgspec mirrors, the contract deciding whatever a
mirror hands back) and fold records into the join, writing each kept record to the state table
(streams.monitor.state); advance the watermark, publish KPI reports, alerts and ranker
examples, persist what closed and the clock; then the batch is acked. faust flushes its
producer (outputs, dead letters, changelog) before it commits acked offsets, so a crash
re-delivers only records whose effects may be lost; the restored state makes their replay
harmless (records of closed answers are late, open ones are joined once). An empty batch
advances the watermark when no records arrive, so the last windows close when traffic stops.

Invalid records are counted and skipped, never retried forever: the stream workers dead-letter
invalid interactions and the scorer validates what it publishes (the catalog has no
`rec.responses.dlq`), so those are filtered here; logged features the monitor cannot use
(contract, vectors) are dead-lettered to `rec.features.dlq`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial

import faust

from schemas.events import InteractionEvent
from schemas.interaction_decoder import decode_interaction
from schemas.ranker_examples import ServedFeatures
from schemas.recommendations import RecommendationResponse
from schemas.response_decoder import decode_response
from schemas.topics import (
    ALERTS_DRIFT,
    INTERACTIONS,
    KPI_METRICS,
    MONITOR_STATE,
    RANKER_EXAMPLES,
    REC_FEATURES,
    REC_RESPONSES,
)
from streams.kafka.contract_loop import LoopCounters
from streams.kafka.deadletter import DeadLetterWriter
from streams.kafka.faust_app import (
    Arrival,
    FaustSender,
    StateTable,
    consume_batches,
    consumer_lag,
    run_until,
    stream_app,
)
from streams.monitor.drift.profiles import FeatureProfile
from streams.monitor.inputs import Interaction, Response
from streams.monitor.metrics import MonitorMetrics
from streams.monitor.pipeline import MonitorPipeline, Published, RecordOutcome
from streams.monitor.settings import MonitorSettings
from streams.monitor.state import MonitorState

logger = logging.getLogger(__name__)

_LAG_EVERY_S = 15.0


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
        self._reference = (
            FeatureProfile.load(settings.psi_reference_path)
            if settings.psi_reference_path else None
        )
        self.pipeline = MonitorPipeline(settings, self._reference)
        kafka = settings.kafka
        self._responses_topic = kafka.topic(REC_RESPONSES)
        self._interactions_topic = kafka.topic(INTERACTIONS)
        self._features_topic = kafka.topic(REC_FEATURES)
        self._kpi_topic = kafka.topic(KPI_METRICS)
        self._alerts_topic = kafka.topic(ALERTS_DRIFT)
        self._examples_topic = kafka.topic(RANKER_EXAMPLES)
        self.sender = FaustSender()
        self.dead_letters = DeadLetterWriter(self.sender, "monitor")
        self.counters = LoopCounters()
        self.state: MonitorState | None = None
        self._readers = {
            self._responses_topic: self._fold_response,
            self._features_topic: self._fold_features,
            self._interactions_topic: self._fold_interaction,
        }
        self._sources: dict[int, list[str]] = {}
        self._evicted_exported = 0
        self._last_lag_export = 0.0
        self._now = time.time()
        self._latest = self._now + settings.max_future_skew_s

    def run(self, stop: threading.Event) -> None:
        logger.info(
            "monitor started group=%s responses=%s interactions=%s",
            self.settings.group_id, self._responses_topic, self._interactions_topic,
        )
        run_until(self._app, stop, on_restart=self._restarted)
        logger.info("monitor stopped pending=%d", len(self.pipeline.join))

    def _restarted(self, reason: str) -> None:
        self.metrics.app_restarts.labels(reason=reason).inc()

    def _app(self) -> faust.App:
        s = self.settings
        app = stream_app(s.kafka, s.group_id, s.commit_interval_s, s.batch_size)
        self.sender.bind(app)
        table = StateTable(app, s.kafka, MONITOR_STATE)
        self.state = MonitorState(table)
        topics = (self._responses_topic, self._interactions_topic, self._features_topic)
        consume_batches(app, topics, self.step, s.poll_timeout_s)
        table.on_recovered(self._on_recovered)
        return app

    async def step(self, batch: list[Arrival]) -> None:
        """One fold-advance-publish cycle; never raises for what a record holds."""
        wall = self._clock()
        self.fold(batch, wall)
        published = self.pipeline.advance(wall)
        if self.state is not None:
            self.state.advanced(self.pipeline, published, self._sources, wall)
        self._publish(published)
        self._export_state(wall)
        self._export_lag(wall)

    def fold(self, batch: list[Arrival], wall: float) -> None:
        """Folds a batch's records into the join, each by its topic's reader; a record the
        pipeline fails on is skipped and counted. Outcomes reach the metrics once per batch."""
        outcomes: dict[tuple[str, str], int] = {}
        counters = self.counters
        self._now = time.time()  # the reader's clock for the future-skew rule, once per batch
        self._latest = self._now + self.settings.max_future_skew_s
        topic, partition = "", -1
        read = self._fold_interaction
        source = ""
        for arrival in batch:
            if arrival.partition != partition or arrival.topic != topic:
                topic, partition = arrival.topic, arrival.partition
                read = self._readers.get(topic, self._fold_interaction)
                source = f"{topic}:{partition}"
            counters.consumed += 1
            outcome: RecordOutcome | str
            try:
                outcome = read(arrival, wall, source)
            except Exception as error:
                # A record that passes its contract yet breaks the pipeline would otherwise
                # stop the monitor at every restart on the same record: skipped and counted.
                logger.exception(
                    "record failed and skipped topic=%s partition=%d offset=%d",
                    topic, partition, arrival.offset,
                )
                arrival.reject(error, counters, self._dead_letters_for(topic))
                outcome = "invalid"
            else:
                if outcome != "invalid":
                    counters.handled += 1
            outcomes[topic, outcome] = outcomes.get((topic, outcome), 0) + 1
        for (name, outcome), n in outcomes.items():
            self.metrics.records.labels(name, outcome).inc(n)

    def _dead_letters_for(self, topic: str) -> DeadLetterWriter | None:
        return self.dead_letters if topic == self._features_topic else None

    def _fold_response(self, arrival: Arrival, wall: float, source: str) -> RecordOutcome | str:
        # The contract's msgspec mirror reads nearly every record; the contract itself decides
        # (and explains) whatever the mirror does not vouch for.
        response: Response | None = decode_response(arrival.value, self._latest)
        if response is None:
            response = arrival.decode(
                RecommendationResponse, self.counters, None, self.settings.max_future_skew_s,
                self._now,
            )
            if response is None:
                return "invalid"
        p = arrival.partition
        outcome = self.pipeline.on_response(response, wall, source, p)
        if outcome == "applied" and self.state is not None and arrival.value is not None:
            self.state.response(p, response.request_id, arrival.value)
        return outcome

    def _fold_features(self, arrival: Arrival, wall: float, source: str) -> RecordOutcome | str:
        """A logged answer into the join, or to `rec.features.dlq` when it is unusable."""
        skew = self.settings.max_future_skew_s
        record = arrival.decode(ServedFeatures, self.counters, self.dead_letters, skew, self._now)
        if record is None:
            return "invalid"
        try:
            record.matrix()
        except ValueError as error:
            arrival.reject(error, self.counters, self.dead_letters, "validate")
            return "invalid"
        p = arrival.partition
        outcome = self.pipeline.on_features(record, wall, source, p)
        if outcome == "applied" and self.state is not None and arrival.value is not None:
            self.state.features(p, record.request_id, arrival.value)
        return outcome

    def _fold_interaction(
        self, arrival: Arrival, wall: float, source: str
    ) -> RecordOutcome | str:
        event: Interaction | None = decode_interaction(arrival.value, self._latest)
        if event is None:
            event = arrival.decode(
                InteractionEvent, self.counters, None, self.settings.max_future_skew_s, self._now
            )
            if event is None:
                return "invalid"
        p = arrival.partition
        outcome = self.pipeline.on_interaction(event, wall, source, p)
        if outcome == "applied" and self.state is not None and arrival.value is not None:
            self.state.act(p, event.event_id, arrival.value)
        return outcome

    def _publish(self, published: Published) -> None:
        send, metrics = self.sender.send, self.metrics
        # Metrics count a report or alert once the broker has acknowledged it, so they never
        # count a lost one; the batch goes on meanwhile (faust flushes before it commits).
        for report in published.reports:
            send(self._kpi_topic, report.model_version, report, partial(metrics.report, report))
        for alert in published.alerts:
            send(self._alerts_topic, alert.detector, alert, partial(metrics.alert, alert))
        for example in published.examples:
            send(self._examples_topic, example.user_id, example)
        if published.reports or published.alerts:
            logger.info(
                "published reports=%d alerts=%d examples=%d dead_letters=%d",
                len(published.reports), len(published.alerts), len(published.examples),
                self.dead_letters.written,
            )
        for feature, value in published.psi.items():
            self.metrics.psi.labels(feature).set(value)

    async def _on_recovered(self) -> None:
        """After each rebalance: this worker's partitions and their state, from the table."""
        assert self.state is not None and self.sender.app is not None
        wall = self._clock()
        assigned = sorted(self.sender.app.assignor.assigned_actives())
        inputs = {self._responses_topic, self._interactions_topic, self._features_topic}
        ours = [tp for tp in assigned if tp.topic in inputs]
        self._sources = {}
        for tp in ours:
            self._sources.setdefault(tp.partition, []).append(f"{tp.topic}:{tp.partition}")
        pipeline = MonitorPipeline(self.settings, self.pipeline.reference)
        for names in self._sources.values():
            for name in names:
                pipeline.clock.register(name, wall)
        rows = self.state.restore(pipeline, wall)
        pipeline.windows.source = ",".join(sorted(f"{tp.topic}:{tp.partition}" for tp in ours))
        self.pipeline = pipeline
        self._evicted_exported = 0
        logger.info(
            "assigned partitions=%d restored_rows=%d reported_through=%s",
            len(ours), rows, pipeline.reported_through,
        )

    def _export_lag(self, wall: float) -> None:
        app = self.sender.app
        if app is None or wall - self._last_lag_export < _LAG_EVERY_S:
            return
        self._last_lag_export = wall
        for topic, partition, behind in consumer_lag(app):
            self.metrics.consumer_lag.labels(topic, str(partition)).set(behind)

    def _export_state(self, wall: float) -> None:
        m, p = self.metrics, self.pipeline
        m.pending.set(len(p.join))
        m.unmatched.set(p.join.acts)
        m.evicted_early.inc(max(0, p.join.evicted_early - self._evicted_exported))
        self._evicted_exported = p.join.evicted_early
        watermark = p.clock.watermark(wall)
        if watermark > float("-inf"):
            m.watermark_lag.set(max(0.0, wall - watermark))
        for metric, detector in p.detectors.items():
            m.kpi_estimate.labels(metric).set(detector.estimate)
        for kind, value in p.freshness_p95().items():
            m.freshness.labels(kind).set(value)
