"""LightGBM lambdarank over the retriever's candidates: the strong baseline for any DNN ranker.

One row per (query, candidate) with the point-in-time features (the retriever's score among
them), the query as the lambdarank group and the target as the only relevant row. Queries whose
target the retriever missed carry no gradient and are left out. Boosting early-stops on the
NDCG@10 of a random holdout of the training queries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import lightgbm
import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from models.lab.ranking import RankingExamples, holdout_split

log = logging.getLogger(__name__)
FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]


class GBMRankerConfig(BaseModel):
    """Boosting settings of :class:`GBMRanker`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_estimators: int = Field(500, ge=1, description="Most boosting rounds.")
    learning_rate: float = Field(0.05, gt=0.0, description="Shrinkage per round.")
    num_leaves: int = Field(15, ge=2, description="Leaves per tree.")
    min_child_samples: int = Field(50, ge=1, description="Fewest rows in a leaf.")
    colsample_bytree: float = Field(0.8, gt=0.0, le=1.0, description="Features per tree.")
    early_stopping_rounds: int = Field(50, ge=1, description="Rounds without holdout gain.")
    holdout_share: float = Field(0.2, gt=0.0, lt=1.0, description="Queries kept for stopping.")
    threads: int = Field(1, ge=1, description="LightGBM threads.")
    seed: int = Field(0, description="Holdout and boosting seed.")


class GBMRanker:
    """:class:`~models.lab.ranking.Ranker` backed by a ``lightgbm`` lambdarank booster."""

    name = "two_stage_gbm"

    def __init__(self, config: GBMRankerConfig | None = None) -> None:
        self.config = config or GBMRankerConfig()
        self.chosen: dict[str, Any] = {}
        self._model: lightgbm.Booster | None = None

    def fit(self, examples: RankingExamples) -> None:
        cfg = self.config
        learnable = examples.subset(examples.with_target())
        fit_rows, holdout_rows = holdout_split(len(learnable), cfg.holdout_share, cfg.seed)
        train, holdout = learnable.subset(fit_rows), learnable.subset(holdout_rows)
        params: dict[str, Any] = {
            "objective": "lambdarank", "metric": "ndcg", "eval_at": [10],
            "learning_rate": cfg.learning_rate, "num_leaves": cfg.num_leaves,
            "min_data_in_leaf": cfg.min_child_samples,
            "feature_fraction": cfg.colsample_bytree, "num_threads": cfg.threads,
            "seed": cfg.seed, "deterministic": True, "verbosity": -1,
        }
        x, y, group = _rows(train)
        data = lightgbm.Dataset(x, y, group=group)
        callbacks: list[Callable[..., Any]] = []
        valid_sets: list[lightgbm.Dataset] = []
        if len(holdout):
            hx, hy, hgroup = _rows(holdout)
            valid_sets.append(lightgbm.Dataset(hx, hy, group=hgroup, reference=data))
            callbacks.append(lightgbm.early_stopping(cfg.early_stopping_rounds, verbose=False))
        self._model = lightgbm.train(params, data, num_boost_round=cfg.n_estimators,
                                     valid_sets=valid_sets, callbacks=callbacks)
        best = int(self._model.best_iteration or cfg.n_estimators)
        self.chosen = {"best_iteration": best, "fit_queries": len(train)}
        log.info("ranker=%s best_iteration=%d", self.name, best)

    def score(self, examples: RankingExamples) -> FloatArray:
        if self._model is None:
            raise RuntimeError("score before fit")
        q, k, f = examples.features.shape
        predicted = self._model.predict(examples.features.reshape(q * k, f),
                                        num_iteration=self._model.best_iteration or None)
        scores = np.asarray(predicted, dtype=np.float32).reshape(q, k)
        return np.where(examples.valid, scores, -np.inf).astype(np.float32)


def _rows(examples: RankingExamples) -> tuple[FloatArray, FloatArray, IntArray]:
    """Valid (query, candidate) rows in query order, their labels and the group sizes."""
    return (
        examples.features[examples.valid],
        examples.labels[examples.valid],
        examples.valid.sum(axis=1).astype(np.int64),
    )
