"""One micro-batch at a time: score (prequential), gate, learn, record offsets, checkpoint, publish.

Kafka-free on purpose: `service.py` feeds it envelopes from a consumer, tests and benchmarks feed
it directly. Everything it changes is rolled back together by the offset-tied checkpoint.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from models.session_checkpoint import session_manifest
from models.session_config import SessionTransformerConfig
from models.store import IntegrityError, ModelStore
from online_trainer.checkpoint import CheckpointStore, TrainerState
from online_trainer.gate import GateDecision, ValidationGate
from online_trainer.ledger import OffsetLedger
from online_trainer.metrics import TrainerMetrics
from online_trainer.online_model import Interaction, OnlineModel, Query
from online_trainer.prequential import RunningMetrics
from online_trainer.publisher import Publication, Publisher
from online_trainer.retrain import RetrainResult
from online_trainer.settings import TrainSettings
from online_trainer.vocabulary import IdVocabulary
from schemas import InteractionEvent, TrainingWindow
from schemas.model_log import ModelLog
from streams.kafka.contract_loop import Envelope, RecordRejected

logger = logging.getLogger(__name__)


@dataclass
class _Pending:
    """Events learned since the last publication: their ingest times give model freshness, and
    the times their batch was handed over and learned split it into stages."""

    ingest_times: list[float] = field(default_factory=list)
    batches: list[tuple[int, float, float]] = field(default_factory=list)
    """(events, handed over, learned) per micro-batch, wall-clock seconds."""
    first_ts: float | None = None
    last_ts: float | None = None
    events: int = 0


FRESHNESS_STAGES = ("queued", "learn", "wait", "publish")
"""Where an event's freshness goes: in Kafka and the consumer until its batch is handed over,
scoring and learning the batch, waiting for the publication to start, the publication until its
announcement is flushed."""

_KEPT_EVENTS = 200_000
"""Most recent events whose freshness (and its stages) the trainer keeps in memory."""


class OnlineTrainer:
    def __init__(
        self,
        settings: TrainSettings,
        config: SessionTransformerConfig,
        publisher: Publisher | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.config = config
        self.publisher = publisher
        self.clock = clock
        self.checkpoints = CheckpointStore(settings.state_dir)
        self.store = ModelStore(settings.store_dir)
        self.log = ModelLog()
        """What model.updates says (the service follows the topic; this trainer's own records
        are applied as it sends them): where a rollback returns to."""
        self.metrics = TrainerMetrics()
        self.running = RunningMetrics(window=settings.gate_window_events)
        self.gate = ValidationGate(
            settings.gate_metric,
            settings.gate_margin,
            settings.gate_window_events,
            settings.gate_min_events,
        )
        self.model = OnlineModel(
            config,
            IdVocabulary(limits=settings.item_limits()),
            max_users=settings.max_users,
            context=settings.context_events,
        )
        self.state = TrainerState()
        self.serving: OnlineModel | None = None
        self._serving_is_candidate = False
        """The serving copy was taken from the candidate and the candidate has not learned
        since: both hold the same weights."""
        self._pending = _Pending()
        self._last_publish = clock()
        self.freshness_s: deque[float] = deque(maxlen=_KEPT_EVENTS)
        """Per event, ingested -> a published version containing it announced (seconds)."""
        self.freshness_stages: dict[str, deque[float]] = {
            stage: deque(maxlen=_KEPT_EVENTS) for stage in FRESHNESS_STAGES
        }
        self.publish_seconds: deque[dict[str, float]] = deque(maxlen=10_000)
        """Per publication, where its time went (see `publish`)."""
        self.publications: list[Publication] = []
        if self.checkpoints.exists():
            self._restore()
        self._tune(self.model)

    # -- state ------------------------------------------------------------------------------

    def _restore(self) -> None:
        try:
            tensors, optimizer, items, histories, state = self.checkpoints.load(
                self.config.max_len, self.settings.max_users, self.settings.item_limits()
            )
        except IntegrityError as error:
            # A checkpoint whose bytes are not the ones it recorded is never trained on: set
            # aside, the trainer starts as without one (from `start_from`).
            logger.error("checkpoint rejected error=%s detail=%s", type(error).__name__, error)
            self.metrics.observe_rejected("checkpoint", error)
            self.checkpoints.set_aside()
            return
        self.model = OnlineModel(
            self.config, items, histories, self.settings.max_users, self.settings.context_events
        )
        self.model.load_tensors(tensors)
        self.model.trainer.optimizer.load_state_dict(optimizer)
        self.state = state
        if state.serving_version:
            self.serving = self._verified_version(state.serving_version, state.serving_sha256)
        logger.info(
            "restored checkpoint batches=%d offsets=%s serving=%s",
            state.batches,
            state.offsets,
            state.serving_version,
        )

    def _tune(self, model: OnlineModel) -> None:
        s = self.settings
        model.tune_online(s.train_context_events, s.online_lr, s.online_item_lr)

    def _verified_version(self, version: str, sha256: str | None) -> OnlineModel | None:
        """The stored version whose bytes match the digest announced for it; None (logged and
        counted) when they do not, or nothing vouches for them: the gate then has no serving
        baseline, and the next publication is a full version."""
        if sha256 is None:
            error: Exception = IntegrityError(f"no announced digest for {version}")
        else:
            try:
                tensors, _manifest = self.store.load(self.settings.model_name, version, sha256)
            except (IntegrityError, OSError, ValueError) as failure:
                error = failure
            else:
                twin = self.model.frozen_copy()
                twin.load_tensors(tensors)
                # The id space moved on since that version: rows it never had are grown.
                twin.ensure_capacity()
                return twin
        logger.error("stored version rejected version=%s error=%s", version, type(error).__name__)
        self.metrics.observe_rejected("serving_version", error)
        return None

    def checkpoint(self) -> None:
        self.checkpoints.save(
            self.model.tensors(),
            self.model.trainer.optimizer.state_dict(),
            self.model.items,
            self.model.histories,
            self.state,
        )

    # -- the batch --------------------------------------------------------------------------

    def handle(self, batch: list[Envelope[InteractionEvent]]) -> Sequence[RecordRejected]:
        """ContractLoop handler. Records below the checkpoint's offsets (re-delivered after a
        rebalance) are skipped: the model already contains them."""
        fresh = [
            e for e in batch if e.position.offset >= self.state.offsets.get(e.position.partition, 0)
        ]
        if fresh:
            self.train_batch(fresh)
        return []

    def train_batch(self, batch: list[Envelope[InteractionEvent]]) -> None:
        started = time.perf_counter()
        handed_over = time.time()
        interactions = [
            Interaction(e.record.user_id, e.record.item_id, int(e.record.timestamp)) for e in batch
        ]
        queries = self.model.queries(interactions, self.settings.scored_share)
        ranks = self.model.ranks(queries)
        self.running.add(ranks)
        self._observe_gate(queries, ranks)
        loss = self.model.learn(interactions, self.settings.steps_per_batch)
        self._serving_is_candidate = False
        if self.serving is not None:
            # The serving baseline scores the candidate's queries: it follows the ids the
            # candidate admits, so a row means the same item to both.
            self.serving.admit(interactions)
        self._account(batch)
        self._pending.batches.append((len(batch), handed_over, time.time()))
        self.metrics.observe_batch(len(batch), time.perf_counter() - started, loss, self.running)
        if self.state.batches % self.settings.checkpoint_every_batches == 0:
            self.checkpoint()
        self.tick()

    def tick(self) -> None:
        """Publication cadence, after every batch and when idle: a candidate is gated as soon as
        it learned events no publication contains, `publish_every_s` passed since the last
        publication finished, and the gate holds enough held-out events it has not decided on
        (after a hold, the next decision waits for that much new evidence, not for a timer)."""
        if (
            self._pending.events
            and self.clock() - self._last_publish >= self.settings.publish_every_s
            and self.gate.ready(has_serving=self.serving is not None)
        ):
            self.maybe_publish()

    def _observe_gate(self, queries: list[Query], ranks: list[float]) -> None:
        """Both models on the same sampled events of this batch, before either learns them."""
        if self.serving is None or self._serving_is_candidate:
            # No serving version, or the same weights as the candidate: the same ranks.
            self.gate.observe(ranks, ranks)
            return
        self.gate.observe(ranks, self.serving.ranks(queries))

    def _account(self, batch: list[Envelope[InteractionEvent]]) -> None:
        by_partition: dict[int, list[int]] = {}
        for env in batch:
            by_partition.setdefault(env.position.partition, []).append(env.position.offset)
            ts = env.position.timestamp_ms
            self._pending.ingest_times.append(ts / 1000 if ts is not None else time.time())
            t = env.record.timestamp
            self._pending.first_ts = min(self._pending.first_ts or t, t)
            self._pending.last_ts = max(self._pending.last_ts or t, t)
        self._pending.events += len(batch)
        for partition, offsets in by_partition.items():
            self.state.ledger.record(partition, min(offsets), max(offsets))
            self.state.offsets[partition] = max(offsets) + 1
        self.state.batches += 1

    # -- publication --------------------------------------------------------------------------

    def maybe_publish(self) -> GateDecision:
        decision = self.gate.decide(has_serving=self.serving is not None)
        self.metrics.observe_gate(decision)
        if not decision.publish or self.publisher is None or self._pending.events == 0:
            if not decision.publish:
                logger.info("gate held candidate reason=%s", decision.reason)
            return decision
        logger.info("gate passed candidate reason=%s", decision.reason)
        self.publish(decision, major=self.state.serving_version is None)
        return decision

    def publish(self, decision: GateDecision | None, major: bool) -> Publication:
        assert self.publisher is not None
        started, started_at = time.perf_counter(), time.time()
        # Versions come from the store, not from counters in the checkpoint: after a crash between
        # a publication and the next checkpoint, the number is still never reused.
        version = str(self.store.next_version(self.settings.model_name, major=major))
        tensors = self.model.tensors()
        parent = None
        if self.serving is not None and self.state.serving_version and not major:
            parent = (self.state.serving_version, self.serving.tensors())
        metrics = self.running.recent()
        if decision is not None:
            metrics = {
                **metrics,
                "gate_candidate": decision.candidate,
                "gate_serving": decision.serving,
            }
        manifest = session_manifest(
            self.settings.model_name,
            version,
            self.config,
            self.model.items.mapping(),
            metrics={k: float(v) for k, v in metrics.items()},
            window={
                "start": int(self._pending.first_ts or 0),
                "end": int(self._pending.last_ts or 0),
            },
        )
        window = None
        if self._pending.first_ts and self._pending.last_ts:
            window = TrainingWindow(
                start=self._pending.first_ts, end=self._pending.last_ts, events=self._pending.events
            )
        prepared = time.perf_counter()
        publication = self.publisher.publish(version, tensors, parent, manifest, window)
        published = time.perf_counter()
        self.log.apply(publication.update)
        self.publisher.retire(self.log, self.settings.model_name)
        self._observe_freshness(publication, started_at)
        self.metrics.observe_publication(publication, self._pending.ingest_times)
        self._pending = _Pending()
        self.publications.append(publication)
        self.state.serving_version = version
        self.state.serving_sha256 = publication.update.sha256
        retired = time.perf_counter()
        self.serving = self.model.weights_copy()
        self._serving_is_candidate = True
        self.gate.reset_serving()
        copied = time.perf_counter()
        # A publication is a natural checkpoint: after a crash the trainer knows what serves.
        self.checkpoint()
        self._last_publish = self.clock()
        self.publish_seconds.append({
            "prepare": prepared - started, **publication.seconds, "retire": retired - published,
            "serving_copy": copied - retired, "checkpoint": time.perf_counter() - copied,
        })
        return publication

    def _observe_freshness(self, publication: Publication, started: float) -> None:
        """Each pending event's freshness, up to the announcement, and its stages."""
        announced = publication.announced_at
        stages = self.freshness_stages
        times = iter(self._pending.ingest_times)
        for events, handed_over, learned in self._pending.batches:
            for _ in range(events):
                ingested = next(times)
                self.freshness_s.append(announced - ingested)
                stages["queued"].append(handed_over - ingested)
                stages["learn"].append(learned - handed_over)
                stages["wait"].append(started - learned)
                stages["publish"].append(announced - started)

    # -- rollback -------------------------------------------------------------------------------

    def roll_back(self, bad_version: str, reason: str) -> str | None:
        """The drift policy's rollback of the version serving now (as model.updates says):
        publish it `rolled_back`, so every scorer serves the newest earlier serving version
        again, and keep learning from that version (the online model that degraded is dropped).
        Returns the version now serving, or None when there is nothing to do."""
        serving = self.log.state(self.settings.model_name).serving
        if self.publisher is None or not serving or serving[0].version != bad_version:
            logger.info("rollback ignored version=%s serving=%s", bad_version,
                        serving[0].version if serving else None)
            return None
        for earlier in serving[1:]:
            twin = self._verified_version(earlier.version, earlier.sha256)
            if twin is not None:
                break
        else:
            logger.warning("rollback impossible version=%s: no earlier verified version",
                           bad_version)
            return None
        self.log.apply(self.publisher.roll_back(serving[0], reason))
        self.serving = twin
        self.model = twin.frozen_copy()
        self._serving_is_candidate = True
        self._tune(self.model)
        self.state.serving_version = earlier.version
        self.state.serving_sha256 = earlier.sha256
        self.running = RunningMetrics(window=self.settings.gate_window_events)
        self.gate.reset_serving()
        self.checkpoint()
        return earlier.version

    # -- full retrain ---------------------------------------------------------------------------

    def adopt_retrained(
        self, result: RetrainResult, end_offsets: dict[int, int]
    ) -> Publication | None:
        """Swap in a retrained model covering history up to `end_offsets` and publish it as a new
        major version. The ledger restarts at the replay's end: the retrain is its own lineage."""
        self.model = result.model
        self._tune(self.model)
        self.state.offsets = dict(end_offsets)
        self.state.ledger = OffsetLedger()
        for partition, end in end_offsets.items():
            if end > 0:
                self.state.ledger.record(partition, 0, end - 1)
        self._pending = _Pending(events=1)
        self.running = RunningMetrics(window=self.settings.gate_window_events)
        if self.publisher is None:
            self.serving = self.model.weights_copy()
            self._serving_is_candidate = True
            self.checkpoint()
            return None
        decision = GateDecision(True, result.validation.get("ndcg@10", 0.0), 0.0, 0, "full retrain")
        return self.publish(decision, major=True)
