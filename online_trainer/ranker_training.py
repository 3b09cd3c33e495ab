"""The ranker's online training: `ranker.examples` micro-batches in, gated ranker versions out.

One labelled list in `held_back_every` (chosen by a hash of its request id, so a restart or a
replay holds back the same ones) joins the held-back set, the most recent `held_back` such
lists; the others train at once, and the oldest held-back ones leave the set for training. The
gate thus always judges on lists the ranker has not trained on, and on recent ones, while
training waits for no held-back set: a ranker that gains a few percent needs a couple of
thousand judged lists before its gain clears the gate's standard errors, and holding back every
list that long would leave the ranker that much behind the stream.
Every `gate_every` micro-batches the gate
(models.logged_ranker.gate) compares the ranker with plain retrieval order on the held-back
lists of the newest retrieval major version (a full retrain changes the candidates and their
retriever scores, so lists of the model before it say nothing of how the ranker does now); a
promoted ranker is stored as a full version (models.store: its digest goes into the
ModelUpdate), names that major in its manifest (`retriever_major`: the scorer applies it to
that major's candidates only) and is announced with stage "serving"; a ranker that does not
beat retrieval order is not published, and the scorer keeps serving retrieval order. Every
decision is kept (`decisions`) for the operator's report.

Examples of another feature set or width than the serving one cannot train this ranker: they
are returned as rejected, for the caller to dead-letter.

The training state is checkpointed (`checkpoint`, one crash-safe write of an
online_trainer.checkpoint.CheckpointFolder named "ranker"): weights and feature scales, optimizer
state, the held-back lists with their retriever majors, the micro-batch count (the gate's
cadence), the versions published, and the offset ledger of the `ranker.examples` records trained
(`train`). A restart restores it and the consumer goes on at the ledger's offsets, so the
micro-batches trained after the last checkpoint are trained again exactly once and none is
skipped. A promotion is checkpointed before it is announced; a restart announces the newest
version it published only when model.updates holds no record of it (`unannounced`): a version
the scorers serve is not announced twice, and one they rolled back stays rolled back. A
checkpoint that fails its digests, cannot be read or is of another feature set, width or ranker
configuration is set aside (logged, counted through `on_rejected`), and the ranker starts afresh.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
import torch

from models.logged_ranker import GateDecision, GradedList, LoggedRanker, LoggedRankerConfig, gate
from models.point_in_time import SERVING_FEATURE_NAMES, SERVING_FEATURE_SET
from models.store import IntegrityError, Manifest, ModelStore
from online_trainer.checkpoint import CheckpointFolder
from online_trainer.ledger import OffsetLedger
from schemas.model_log import FALLBACK_VERSIONS, ModelLog
from schemas.model_updates import ModelUpdate, major_part
from schemas.ranker_examples import RankerExample
from streams.kafka.contract_loop import Envelope

logger = logging.getLogger(__name__)
RANKER_MODEL_NAME = "ranker"
_KEPT_PUBLISHED = FALLBACK_VERSIONS + 1
"""Publications a checkpoint keeps, newest last: as many as model.updates keeps serving (only
the newest is ever announced again), so the checkpoint does not grow with the run."""


@dataclass(frozen=True)
class RankerStep:
    """What one micro-batch did."""

    trained_lists: int
    rejected: list[tuple[RankerExample, ValueError]]
    decision: GateDecision | None = None
    update: ModelUpdate | None = None
    """The publication to announce on `model.updates` (a promoted version), if any."""


@dataclass
class RankerTraining:
    store: ModelStore
    held_back: int = 200
    held_back_every: int = 1
    """One list in this many joins the held-back set (1: every list waits there first)."""
    gate_every: int = 10
    min_gain: float = 0.0
    min_lists: int = 50
    model_name: str = RANKER_MODEL_NAME
    config: LoggedRankerConfig = field(default_factory=LoggedRankerConfig)
    decisions: list[GateDecision] = field(default_factory=list)
    published: list[ModelUpdate] = field(default_factory=list)
    checkpoints: CheckpointFolder | None = None
    """Where the training state is checkpointed; None: it lives in memory only."""
    on_rejected: Callable[[str, BaseException], None] = lambda _what, _error: None
    """Told of a checkpoint set aside (what, error): the trainer's metrics count it."""

    def __post_init__(self) -> None:
        self.ranker = LoggedRanker(len(SERVING_FEATURE_NAMES), self.config)
        self._held_back: deque[tuple[GradedList, str]] = deque()
        """Held-back lists with the major version of the retriever that produced them."""
        self._batches = 0
        self._unsaved = 0
        self.ledger = OffsetLedger()
        """The `ranker.examples` offsets trained (`train`): where a restarted consumer goes on."""
        if self.checkpoints is not None and self.checkpoints.exists():
            self._restore(self.checkpoints)

    def train(
        self, batch: Sequence[Envelope[RankerExample]], now: float | None = None
    ) -> RankerStep | None:
        """One consumed micro-batch: records the ledger already holds (re-delivered after a
        rebalance) are skipped, the others trained (`step`) and recorded. None when nothing was
        new: the state did not change."""
        fresh = [
            e for e in batch
            if e.position.offset >= (self.ledger.next_offset(e.position.partition) or 0)
        ]
        if not fresh:
            return None
        step = self.step([e.record for e in fresh], now)
        spans: dict[int, list[int]] = {}
        for e in fresh:
            spans.setdefault(e.position.partition, []).append(e.position.offset)
        for partition, offsets in sorted(spans.items()):
            self.ledger.record(partition, min(offsets), max(offsets))
        return step

    def step(self, examples: Sequence[RankerExample], now: float | None = None) -> RankerStep:
        lists, rejected = _graded(examples)
        leaving: list[GradedList] = []
        for graded, major, request_id in lists:
            if not self.holds_back(request_id):
                leaving.append(graded)
                continue
            self._held_back.append((graded, major))
            if len(self._held_back) > self.held_back:
                leaving.append(self._held_back.popleft()[0])
        if leaving:
            self.ranker.partial_fit(leaving)
        self._batches += 1
        self._unsaved += 1
        if self._batches % self.gate_every:
            return RankerStep(len(leaving), rejected)
        retriever = self._held_back[-1][1] if self._held_back else ""
        judged = [graded for graded, major in self._held_back if major == retriever]
        decision = gate(self.ranker, judged, self.min_gain, self.min_lists)
        self.decisions.append(decision)
        logger.info(
            "ranker gate promote=%s ranker_ndcg10=%.4f retrieval_ndcg10=%.4f lists=%d reason=%s",
            decision.promote, decision.ranker_ndcg, decision.retrieval_ndcg, decision.lists,
            decision.reason,
        )
        update = self._publish(decision, retriever, time.time() if now is None else now)
        return RankerStep(len(leaving), rejected, decision, update)

    def _publish(
        self, decision: GateDecision, retriever: str, now: float
    ) -> ModelUpdate | None:
        if not decision.promote:
            return None
        version = str(self.store.next_version(self.model_name, major=False))
        metrics = {
            "ranker_ndcg@10": decision.ranker_ndcg,
            "retrieval_ndcg@10": decision.retrieval_ndcg,
            "held_back_lists": float(decision.lists),
        }
        manifest = Manifest(
            name=self.model_name, version=version, kind="full", metrics=metrics,
            config={**self.ranker.manifest_config(), "feature_set": SERVING_FEATURE_SET,
                    "retriever_major": retriever},
        )
        self.store.save_full(self.model_name, self.ranker.tensors(), manifest)
        update = ModelUpdate(
            model_name=self.model_name, version=version, kind="full", stage="serving",
            sha256=self.store.digest(self.model_name, version), metrics=metrics,
            published_at=now,
        )
        self.published.append(update)
        return update

    def holds_back(self, request_id: str) -> bool:
        """Whether the list of `request_id` joins the held-back set."""
        return zlib.crc32(request_id.encode()) % self.held_back_every == 0

    @property
    def unsaved_batches(self) -> int:
        """Micro-batches trained since the last checkpoint (or the start)."""
        return self._unsaved

    def unannounced(self, log: ModelLog) -> ModelUpdate | None:
        """The newest version this ranker published when `log` (model.updates read to its end)
        holds no record of it: a checkpoint is written before its announcement, so a kill in
        between leaves it to announce. A version the log holds, serving or rolled back, is
        never announced again."""
        if not self.published:
            return None
        newest = self.published[-1]
        return None if log.record(newest.model_name, newest.version) else newest

    # -- checkpoint ---------------------------------------------------------------------------

    def checkpoint(self) -> None:
        """The whole training state in one crash-safe write; nothing without `checkpoints` or
        when nothing was trained since the last one."""
        if self.checkpoints is None or not self._unsaved:
            return
        tensors = {f"ranker.{k}": v for k, v in self.ranker.tensors().items()}
        tensors.update(_pack([graded for graded, _major in self._held_back]))
        self.checkpoints.write(tensors, self.ranker.optimizer.state_dict(), {
            **self._identity(),
            "held_back_majors": [major for _graded, major in self._held_back],
            "batches": self._batches,
            "lists_trained": self.ranker.lists_trained,
            "ledger": self.ledger.to_state(),
            "published": [u.model_dump(mode="json") for u in self.published[-_KEPT_PUBLISHED:]],
        })
        self._unsaved = 0

    def _identity(self) -> dict[str, Any]:
        """What a checkpoint must match to be this ranker's."""
        return {"feature_set": SERVING_FEATURE_SET, **self.ranker.manifest_config()}

    def _restore(self, checkpoints: CheckpointFolder) -> None:
        """The checkpointed state; a checkpoint that fails its digests, cannot be read or is
        another ranker's is set aside (logged, counted) and the ranker starts afresh."""
        try:
            self._load(*checkpoints.read())
        except (IntegrityError, OSError, ValueError, KeyError, TypeError) as error:
            logger.error("ranker checkpoint rejected error=%s detail=%s",
                         type(error).__name__, error)
            self.on_rejected("ranker_checkpoint", error)
            checkpoints.set_aside()
            return
        logger.info(
            "restored ranker checkpoint batches=%d held_back=%d published=%s offsets=%s",
            self._batches, len(self._held_back), [u.version for u in self.published],
            {p: self.ledger.next_offset(p) for p in self.ledger.ranges},
        )

    def _load(
        self, tensors: dict[str, torch.Tensor], optimizer: dict[str, Any], raw: dict[str, Any]
    ) -> None:
        identity = {key: raw.get(key) for key in self._identity()}
        if identity != self._identity():
            raise ValueError(f"checkpoint of another ranker: feature_set={raw.get('feature_set')} "
                             f"n_features={raw.get('n_features')}")
        ranker = LoggedRanker.from_tensors(
            {k.removeprefix("ranker."): v for k, v in tensors.items() if k.startswith("ranker.")},
            self.ranker.manifest_config(), self.ranker.device,
        )
        ranker.optimizer.load_state_dict(optimizer)
        ranker.lists_trained = int(raw["lists_trained"])
        held_back = deque(
            (g, str(m)) for g, m in zip(_unpack(tensors), raw["held_back_majors"], strict=True)
        )
        batches, ledger = int(raw["batches"]), OffsetLedger.from_state(raw["ledger"])
        published = [ModelUpdate.model_validate(u) for u in raw["published"]]
        # Nothing is assigned before everything parsed: a bad checkpoint leaves a fresh ranker.
        self.ranker, self._held_back, self._batches = ranker, held_back, batches
        self.ledger, self.published = ledger, published


def _pack(lists: Sequence[GradedList]) -> dict[str, torch.Tensor]:
    """Held-back lists as three tensors: their rows, grades and lengths, in order."""
    width = len(SERVING_FEATURE_NAMES)
    rows = [g.vectors.astype(np.float32, copy=False) for g in lists]
    return {
        "held_back.vectors": torch.from_numpy(
            np.concatenate(rows) if rows else np.zeros((0, width), dtype=np.float32)
        ),
        "held_back.grades": torch.from_numpy(
            np.concatenate([g.grades for g in lists]) if lists else np.zeros(0, np.int64)
        ),
        "held_back.lengths": torch.tensor([len(g.grades) for g in lists], dtype=torch.int64),
    }


def _unpack(tensors: dict[str, torch.Tensor]) -> list[GradedList]:
    vectors = tensors["held_back.vectors"].numpy()
    grades = tensors["held_back.grades"].numpy()
    bounds = np.cumsum([0, *tensors["held_back.lengths"].tolist()])
    return [GradedList(vectors[lo:hi], grades[lo:hi]) for lo, hi in pairwise(bounds)]


def _graded(
    examples: Sequence[RankerExample],
) -> tuple[list[tuple[GradedList, str, str]], list[tuple[RankerExample, ValueError]]]:
    """The usable examples as (list, retrieval major, request id), and the refused ones."""
    lists, rejected = [], []
    for example in examples:
        try:
            if example.feature_set != SERVING_FEATURE_SET:
                raise ValueError(f"feature set {example.feature_set} is not the serving one")
            matrix, grades = example.graded()
            if matrix.shape[1] != len(SERVING_FEATURE_NAMES):
                raise ValueError("vectors are not the serving feature set's width")
        except ValueError as error:
            rejected.append((example, error))
            continue
        graded = GradedList(matrix, np.asarray(grades, dtype=np.int64))
        lists.append((graded, major_part(example.model_version), example.request_id))
    return lists, rejected
