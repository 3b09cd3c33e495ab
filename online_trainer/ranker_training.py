"""The ranker's online training: `ranker.examples` micro-batches in, gated ranker versions out.

Each labelled example first joins the held-back set (the most recent `held_back` lists); the
oldest ones leave it for training, so the gate always judges on examples the ranker has not
trained on, and on the most recent ones. Every `gate_every` micro-batches the gate
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
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from models.logged_ranker import GateDecision, GradedList, LoggedRanker, LoggedRankerConfig, gate
from models.point_in_time import SERVING_FEATURE_NAMES, SERVING_FEATURE_SET
from models.store import Manifest, ModelStore
from schemas.model_updates import ModelUpdate, major_part
from schemas.ranker_examples import RankerExample

logger = logging.getLogger(__name__)
RANKER_MODEL_NAME = "ranker"


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
    gate_every: int = 10
    min_gain: float = 0.0
    min_lists: int = 50
    model_name: str = RANKER_MODEL_NAME
    config: LoggedRankerConfig = field(default_factory=LoggedRankerConfig)
    decisions: list[GateDecision] = field(default_factory=list)
    published: list[ModelUpdate] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ranker = LoggedRanker(len(SERVING_FEATURE_NAMES), self.config)
        self._held_back: deque[tuple[GradedList, str]] = deque()
        """Held-back lists with the major version of the retriever that produced them."""
        self._batches = 0

    def step(self, examples: Sequence[RankerExample], now: float | None = None) -> RankerStep:
        lists, rejected = _graded(examples)
        leaving: list[GradedList] = []
        for graded in lists:
            self._held_back.append(graded)
            if len(self._held_back) > self.held_back:
                leaving.append(self._held_back.popleft()[0])
        if leaving:
            self.ranker.partial_fit(leaving)
        self._batches += 1
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


def _graded(
    examples: Sequence[RankerExample],
) -> tuple[list[tuple[GradedList, str]], list[tuple[RankerExample, ValueError]]]:
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
        lists.append((graded, major_part(example.model_version)))
    return lists, rejected
