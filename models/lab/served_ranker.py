"""The served ranker, evaluated offline: :class:`LoggedRanker` over the serving feature set.

The scorer re-orders with a LoggedRanker the online trainer fits on the vectors the scorer
logged: the serving columns of models.point_in_time, fewer than the offline rankers read.
`streamrec eval` reports it as `two_stage_served`: the same model class on the same columns of
the offline examples, one list per query (its top-k candidates, the target graded 1), fed in
micro-batches as the online trainer feeds it, for as many passes as a holdout of the queries
still improves on. The figure belongs to what is served, not to the wider offline set.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from pydantic import BaseModel, ConfigDict, Field

from models.lab.ranking import RankingExamples, holdout_split, ndcg_at_10, reranked_ranks
from models.logged_ranker import GradedList, LoggedRanker, LoggedRankerConfig
from models.point_in_time import FEATURE_NAMES, SERVING_FEATURE_NAMES

log = logging.getLogger(__name__)
FloatArray = npt.NDArray[np.float32]
SERVING_COLUMNS = [FEATURE_NAMES.index(name) for name in SERVING_FEATURE_NAMES]
"""Where the serving feature set's columns sit among the offline features."""


class ServedRankerConfig(BaseModel):
    """Offline fitting of :class:`ServedRanker`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lists_per_batch: int = Field(50, ge=1, description="Lists per `partial_fit` micro-batch.")
    max_epochs: int = Field(20, ge=1, description="Most passes over the training queries.")
    patience: int = Field(3, ge=1, description="Passes without a holdout gain before stopping.")
    holdout_share: float = Field(0.1, gt=0.0, lt=1.0, description="Queries held out to stop.")
    seed: int = Field(0, description="Initialisation, holdout and shuffling seed.")


class ServedRanker:
    name = "two_stage_served"

    def __init__(self, config: ServedRankerConfig | None = None) -> None:
        self.config = config or ServedRankerConfig()
        self.chosen: dict[str, Any] = {}
        self._ranker: LoggedRanker | None = None

    def fit(self, examples: RankingExamples) -> None:
        cfg = self.config
        torch.manual_seed(cfg.seed)
        fit_rows, holdout_rows = holdout_split(len(examples), cfg.holdout_share, cfg.seed)
        train, holdout = examples.subset(fit_rows), examples.subset(holdout_rows)
        learnable = train.subset(train.with_target())
        lists = _lists(learnable)
        ranker = LoggedRanker(len(SERVING_COLUMNS), LoggedRankerConfig(seed=cfg.seed),
                              device=torch.device("cpu"))
        # Untrained, the ranker orders as retrieval does: a pass must beat that to count.
        best, best_epoch, kept = _ndcg(ranker, holdout), 0, copy.deepcopy(ranker)
        rng = np.random.default_rng(cfg.seed)
        for epoch in range(1, cfg.max_epochs + 1):
            order = rng.permutation(len(lists))
            for start in range(0, len(order), cfg.lists_per_batch):
                ranker.partial_fit([lists[i] for i in order[start : start + cfg.lists_per_batch]])
            score = _ndcg(ranker, holdout)
            if score > best:
                best, best_epoch, kept = score, epoch, copy.deepcopy(ranker)
            elif epoch - best_epoch >= cfg.patience:
                break
        self._ranker = kept
        self.chosen = {"best_epoch": best_epoch, "holdout_ndcg@10": best,
                       "fit_queries": len(lists), "features": list(SERVING_FEATURE_NAMES)}
        log.info("ranker=%s best_epoch=%d holdout_ndcg10=%.4f", self.name, best_epoch, best)

    def score(self, examples: RankingExamples) -> FloatArray:
        if self._ranker is None:
            raise RuntimeError("score before fit")
        return _scores(self._ranker, examples)


def _lists(examples: RankingExamples) -> list[GradedList]:
    """One graded list per query: its valid candidates' serving vectors, the target graded 1."""
    return [
        GradedList(
            examples.features[q][examples.valid[q]][:, SERVING_COLUMNS],
            examples.labels[q][examples.valid[q]].astype(np.int64),
        )
        for q in range(len(examples))
    ]


def _scores(ranker: LoggedRanker, examples: RankingExamples) -> FloatArray:
    q, k, _ = examples.features.shape
    flat = examples.features[:, :, SERVING_COLUMNS].reshape(q * k, len(SERVING_COLUMNS))
    return ranker.score(np.ascontiguousarray(flat)).reshape(q, k)


def _ndcg(ranker: LoggedRanker, examples: RankingExamples) -> float:
    return float(ndcg_at_10(reranked_ranks(_scores(ranker, examples), examples)).mean())
