"""`streamrec train`: the online trainer on Kafka, with drift-triggered full retrains.

Liveness: librdkafka heartbeats from its own thread, and a full retrain runs in a background
thread while the main loop keeps polling with the partitions paused, so a long retrain never
exceeds max.poll.interval.ms nor triggers a rebalance.

The trainer follows `model.updates` too (from the beginning at each start, as the scorers do):
what serves is the log's, canary decisions included, and a rollback reads the log to its end
first, so it takes out the version that serves and returns to the one the scorers fall back to.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

from models.store import ModelStore
from online_trainer.alerts import DriftAlerts
from online_trainer.checkpoint import CheckpointFolder
from online_trainer.ledger import OffsetLedger
from online_trainer.publisher import Publisher
from online_trainer.ranker_training import RankerTraining
from online_trainer.replay import RetrainWindow, retrain_window
from online_trainer.retrain import Mode, RetrainResult, full_retrain
from online_trainer.settings import TrainSettings
from online_trainer.trainer import OnlineTrainer
from online_trainer.window import retrain_window_events
from schemas import InteractionEvent, ModelUpdate
from schemas.model_updates import parse_update_key
from schemas.ranker_examples import RankerExample
from schemas.topics import INTERACTIONS, MODEL_UPDATES, RANKER_EXAMPLES
from streams.kafka.catch_up import read_to_end
from streams.kafka.consumer import BatchConsumer
from streams.kafka.contract_loop import ContractLoop, Envelope, RecordRejected, Tombstone
from streams.kafka.deadletter import DeadLetterWriter
from streams.kafka.producer import EventProducer

logger = logging.getLogger(__name__)

_LOG_CATCH_UP_S = 30.0


class TrainerService:
    def __init__(self, settings: TrainSettings) -> None:
        self.settings = settings
        config = settings.model
        self.producer = EventProducer(settings.kafka)
        publisher = Publisher(
            ModelStore(settings.store_dir),
            self.producer,
            settings.kafka,
            settings.model_name,
            settings.full_publish_share,
            settings.publish_stage,
        )
        self.trainer = OnlineTrainer(settings, config, publisher)
        self.topic = settings.kafka.topic(INTERACTIONS)
        self.consumer = BatchConsumer(
            settings.kafka,
            settings.group_id,
            [self.topic],
            on_assign=self._on_assign,
            # Eager assignment: the whole assignment is (re)seeked from the checkpoint at once.
            overrides={"partition.assignment.strategy": "range"},
        )
        self.loop: ContractLoop[InteractionEvent] = ContractLoop(
            self.consumer,
            InteractionEvent,
            self.trainer.handle,
            self.producer,
            None,
            batch_size=settings.batch_size,
            batch_timeout_s=settings.batch_timeout_s,
            max_future_skew_s=settings.max_future_skew_s,
        )
        self.alerts = DriftAlerts(
            settings.kafka,
            settings.alerts_group_id,
            settings.alert_max_age_s,
            self.producer,
            settings.max_future_skew_s,
        )
        self.ranker = RankerTraining(
            ModelStore(settings.store_dir),
            held_back=settings.ranker_held_back,
            held_back_every=settings.ranker_held_back_every,
            gate_every=settings.ranker_gate_every,
            min_gain=settings.ranker_min_gain,
            min_lists=settings.ranker_min_lists,
            checkpoints=CheckpointFolder(settings.state_dir, "ranker")
            if settings.ranker_enabled else None,
            on_rejected=self.trainer.metrics.observe_rejected,
        )
        self.ranker_announced = not self.ranker.published
        """Whether the checkpoint's newest ranker publication is known to be on the log."""
        self.ranker_loop = self._ranker_loop() if settings.ranker_enabled else None
        self.updates_loop = self._updates_loop()
        self._retrain: threading.Thread | None = None
        self._scheduled: RetrainWindow | None = None
        self._retrain_result: RetrainResult | None = None
        self._retrain_ends: dict[int, int] = {}
        self.retrains = 0
        self.retrain_failures = 0
        self.retrains_refused = 0

    def _ranker_loop(self) -> ContractLoop[RankerExample]:
        starts = ReadsEveryExampleOnce(self.ranker.ledger)
        consumer = BatchConsumer(
            self.settings.kafka,
            self.settings.ranker_group_id,
            [self.settings.kafka.topic(RANKER_EXAMPLES)],
            on_assign=starts.on_assign,
            on_revoke=starts.on_revoke,
            # Eager assignment: the whole assignment is positioned at once.
            overrides={"partition.assignment.strategy": "range"},
        )
        return ContractLoop(
            consumer,
            RankerExample,
            self._on_ranker_examples,
            self.producer,
            DeadLetterWriter(self.producer, "trainer"),
            batch_size=self.settings.batch_size,
            # What is queued, never a wait: `interactions` is the loop that waits (for its
            # micro-batch), and a wait here would hold every interaction behind it.
            batch_timeout_s=0.0,
            max_future_skew_s=self.settings.max_future_skew_s,
        )

    def _updates_loop(self) -> ContractLoop[ModelUpdate]:
        # A fresh group per start: the whole (compacted) log is read again. A secondary reader:
        # the scorers dead-letter what is invalid, the trainer only counts it.
        group = f"{self.settings.group_id}.model-updates.{uuid.uuid4().hex[:12]}"
        topic = self.settings.kafka.topic(MODEL_UPDATES)
        consumer = BatchConsumer(self.settings.kafka, group, [topic], auto_offset_reset="earliest")
        return ContractLoop(
            consumer, ModelUpdate, self._on_updates, self.producer, None,
            batch_size=100, batch_timeout_s=0.0,
            max_future_skew_s=self.settings.max_future_skew_s, on_tombstone=self._on_retired,
        )

    def _on_updates(self, batch: list[Envelope[ModelUpdate]]) -> list[RecordRejected]:
        for envelope in batch:
            record = envelope.record
            if envelope.key == record.log_key.encode():  # the scorers refuse the others
                self.trainer.log.apply(record)
        return []

    def _on_retired(self, tombstone: Tombstone) -> None:
        self.trainer.log.retire(*parse_update_key(tombstone.key))

    def _on_ranker_examples(
        self, batch: list[Envelope[RankerExample]]
    ) -> list[RecordRejected]:
        step = self.ranker.train(batch)
        if step is None:
            return []
        if step.decision is not None:
            self.trainer.metrics.observe_ranker_gate(step.decision)
        if step.update is not None:
            # Checkpointed before it is announced: after a kill in between, the restart announces
            # it (`_announce_checkpointed_ranker`) rather than promote the same training again.
            self.ranker.checkpoint()
            self._announce_ranker(step.update)
        elif self.ranker.unsaved_batches >= self.settings.checkpoint_every_batches:
            self.ranker.checkpoint()
        rejected = {id(example): error for example, error in step.rejected}
        return [
            RecordRejected(e, rejected[id(e.record)])  # type: ignore[arg-type]
            for e in batch if id(e.record) in rejected
        ]

    def _announce_ranker(self, update: ModelUpdate) -> None:
        self.producer.send(self.settings.kafka.topic(MODEL_UPDATES), update.log_key, update)
        self.producer.flush()
        self.trainer.log.apply(update)
        if self.trainer.publisher is not None:
            self.trainer.publisher.retire(self.trainer.log, update.model_name)

    def _announce_checkpointed_ranker(self) -> None:
        """Once model.updates is read to its end: the restored ranker's newest publication is
        announced when the log holds no record of it, and left alone when it does (served, or
        rolled back since: a rollback is never undone by a restart)."""
        if not self._read_model_updates():
            return  # tried again on the next round
        self.ranker_announced = True
        update = self.ranker.unannounced(self.trainer.log)
        if update is not None:
            logger.warning("announcing checkpointed ranker version=%s", update.version)
            self._announce_ranker(update)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # The checkpoint, not the group's committed offsets, says where the model stands: the
        # loop commits after every batch but checkpoints less often, so a committed offset can be
        # ahead of what the restored model learned. A partition the checkpoint has never seen
        # starts at the beginning (or the end, by setting), never at a committed offset.
        start = OFFSET_BEGINNING if self.settings.start_from == "earliest" else OFFSET_END
        for tp in partitions:
            tp.offset = self.trainer.state.offsets.get(tp.partition, start)
        logger.info("assigned partitions=%s", [(tp.partition, tp.offset) for tp in partitions])
        consumer.assign(partitions)

    def run(self, stop: threading.Event, idle_exit_s: float | None = None) -> None:
        try:
            self._run(stop, idle_exit_s)
            if self.trainer.state.batches:
                self.trainer.checkpoint()  # a graceful stop keeps all work done
            self.ranker.checkpoint()
        finally:
            self.close()

    def _run(self, stop: threading.Event, idle_exit_s: float | None) -> None:
        idle_since = time.monotonic()
        while not stop.is_set():
            if not self.ranker_announced:
                self._announce_checkpointed_ranker()
            consumed = self.loop.run_once()
            self.updates_loop.run_once()
            if self.ranker_loop is not None:
                consumed += self.ranker_loop.run_once()
            if not consumed:
                self.trainer.tick()
            self._poll_alerts()
            self._start_scheduled()
            self._finish_retrain()
            # Waiting for an assignment (a restarted member waits for the dead one's session to
            # expire) is not idleness.
            waiting = not self.consumer.raw.assignment()
            if consumed or waiting or self._retrain is not None or self._scheduled is not None:
                idle_since = time.monotonic()
            elif idle_exit_s is not None and time.monotonic() - idle_since > idle_exit_s:
                break

    def close(self) -> None:
        # No checkpoint here: after a failure the in-memory state may be half-applied, and the
        # last checkpoint is the state that is known to be consistent with its offsets.
        self.producer.flush()
        self.consumer.close()
        self.updates_loop.consumer.close()
        if self.ranker_loop is not None:
            self.ranker_loop.consumer.close()
        self.alerts.close()

    # -- drift-triggered retrain ---------------------------------------------------------------

    def _poll_alerts(self) -> None:
        for received in self.alerts.poll():
            alert, message = received.alert, received.message
            if alert.suggested_action == "retrain":
                logger.warning(
                    "drift alert detector=%s metric=%s -> retrain", alert.detector, alert.metric
                )
                self._schedule_retrain(alert.change_started_at)
                self.alerts.hold(message)
                continue
            if alert.suggested_action == "rollback" and alert.model_version is not None:
                self._read_model_updates()
                self.trainer.roll_back(alert.model_version, f"{alert.detector} on {alert.metric}")
            self.alerts.done(message)

    def _read_model_updates(self) -> bool:
        """model.updates to its end on this thread: a rollback must act on what serves now."""
        loop = self.updates_loop
        topic = self.settings.kafka.topic(MODEL_UPDATES)
        return read_to_end(loop, self.settings.kafka, topic, _LOG_CATCH_UP_S, wait=loop.run_once)

    def _schedule_retrain(self, change_started_at: float | None, delay_s: float = 0.0) -> None:
        """The first alert of a drift plans the retrain; alerts of the same drift that come
        while it waits or runs add nothing. A failed retrain is planned again after a delay,
        its alerts still pending."""
        if self._retrain is not None or self._scheduled is not None:
            return
        s = self.settings
        plan = retrain_window(
            time.time(), s.retrain_window_s, change_started_at, s.retrain_min_after_change_s
        )
        self._scheduled = RetrainWindow(plan.since, plan.start_at + delay_s)
        logger.info("retrain scheduled in_s=%.1f", self._scheduled.start_at - time.time())

    def _start_scheduled(self) -> None:
        plan = self._scheduled
        due = plan is not None and time.time() >= plan.start_at
        if plan is not None and due and self.start_retrain(since=plan.since):
            self._scheduled = None

    def start_retrain(self, mode: Mode | None = None, since: float | None = None) -> bool:
        """`since`: record time the replay starts at; None = `retrain_window_s` back from now."""
        if self._retrain is not None:
            return False
        assignment = self.consumer.raw.assignment()
        self.consumer.raw.pause(assignment)
        self._retrain = threading.Thread(
            target=self._run_retrain,
            args=(mode or self.settings.retrain_mode, since),
            name="retrain",
            daemon=True,
        )
        self._retrain.start()
        return True

    def _run_retrain(self, mode: Mode, since: float | None) -> None:
        try:
            self._retrain_once(mode, since)
        except Exception:
            # The online loop keeps serving the current model; the next alert will try again.
            logger.exception("full retrain failed mode=%s", mode)
            self.retrain_failures += 1

    def _retrain_once(self, mode: Mode, since: float | None) -> None:
        since = time.time() - self.settings.retrain_window_s if since is None else since
        window = retrain_window_events(self.settings, since)
        interactions = window.interactions
        config = self.trainer.config.model_copy(
            update={"time_budget_s": self.settings.retrain_budget_s}
        )
        incumbent = self.trainer.serving if self.settings.retrain_gate else None
        self._retrain_result = full_retrain(
            interactions, self.trainer.model, config, mode, self.settings.max_users,
            incumbent=incumbent,
        )
        self._retrain_ends = window.end_offsets

    def _finish_retrain(self) -> None:
        if self._retrain is None or self._retrain.is_alive():
            return
        self._retrain = None
        result, ends = self._retrain_result, self._retrain_ends
        self._retrain_result = None
        assignment = self.consumer.raw.assignment()
        if result is not None and not result.beats_incumbent():
            # A drift that did not happen (a KPI trend, a noisy window): what serves is better
            # on the retrain's own validation queries, so it keeps serving and keeps learning.
            assert result.shared is not None
            logger.warning("retrain refused: the serving version is better retrained=%s "
                           "serving=%s", *(m.get("ndcg@10") for m in result.shared))
            self.trainer.metrics.observe_retrain(publish=False)
            self.retrains_refused += 1
            self.alerts.release()
        elif result is not None:
            self.trainer.metrics.observe_retrain(publish=True)
            self.trainer.adopt_retrained(result, ends)
            for tp in assignment:
                if tp.partition in ends:
                    self.consumer.raw.seek(
                        TopicPartition(tp.topic, tp.partition, ends[tp.partition])
                    )
            self.retrains += 1
            self.alerts.release()
        else:
            self._schedule_retrain(None, delay_s=self.settings.retrain_retry_s)
        self.consumer.raw.resume(assignment)


class ReadsEveryExampleOnce:
    """Where the ranker's consumer starts on each assignment. A partition this process already
    read (an eager rebalance revokes and re-assigns everything, e.g. after a broker outage) goes
    on from where this process stopped; one first assigned to it goes on at the ranker
    checkpoint's next offset, or the beginning when the checkpoint never saw it: no example is
    trained on twice or skipped, across rebalances and restarts."""

    def __init__(self, ledger: OffsetLedger) -> None:
        self.ledger = ledger
        """The restored ranker's ledger (the ranker trains from it, never replaces it)."""
        self.next_offsets: dict[int, int] = {}

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            local = self.next_offsets.get(tp.partition)
            checkpointed = self.ledger.next_offset(tp.partition)
            tp.offset = next(
                (o for o in (local, checkpointed) if o is not None), OFFSET_BEGINNING
            )
        logger.info("ranker examples assigned partitions=%s",
                    [(tp.partition, tp.offset) for tp in partitions])
        consumer.assign(partitions)

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # The local fetch position: no broker call, so it works while the broker is away.
        for tp in consumer.position(partitions):
            if tp.offset >= 0:
                self.next_offsets[tp.partition] = tp.offset
