"""The DLRM ranker trained to correct the retriever, with a listwise loss.

The final score of a candidate is ``a * retriever_score + dlrm(features, vectors)``: the
retriever's softmax logits are already a calibrated ranking, so the DLRM (:mod:`models.ranker`)
only learns what to add to them. Its output layer starts at zero and ``a`` at one, so training
starts from exactly the retriever's order and a ranker with nothing to learn stays there. The
loss is a softmax cross-entropy over each query's candidates with the target as the label (a
listwise loss: what matters is the target's place among its own query's candidates).

Inputs: the standardised point-in-time features as the dense part; the query vector, the
candidate's item vector and the user's last item vector (L2-normalised) as the sparse slots, so
the DLRM's dot interactions see query-candidate and last-item-candidate similarity directly.
Training early-stops on the NDCG@10 of a random holdout of the training queries. The score is
the mean of ``n_models`` such rankers, each with its own seed and holdout: one model's early
stopping on a few hundred holdout queries is noisy, and the average of a few varies far less.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F  # noqa: N812 - torch convention
from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from models.embeddings import padded_width
from models.lab.ranking import RankingExamples, holdout_split, ndcg_at_10, reranked_ranks
from models.point_in_time import unit_rows
from models.ranker import DLRMConfig, correction_dlrm

log = logging.getLogger(__name__)
FloatArray = npt.NDArray[np.float32]
N_SLOTS = 3  # query, candidate, last item


class CorrectionRankerConfig(BaseModel):
    """Size and training settings of :class:`CorrectionRanker`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bottom_mlp: tuple[int, ...] = Field((64,), description="Hidden widths of the dense MLP.")
    top_mlp: tuple[int, ...] = Field((64, 32), description="Hidden widths of the top MLP.")
    lr: float = Field(1e-3, gt=0.0, description="Adam learning rate.")
    weight_decay: float = Field(1e-4, ge=0.0, description="AdamW decoupled weight decay.")
    epochs: int = Field(200, ge=1, description="Most passes over the training queries.")
    batch_queries: int = Field(32, ge=1, description="Queries (each with all candidates) a step.")
    patience: int = Field(20, ge=1, description="Epochs without holdout gain before stopping.")
    holdout_share: float = Field(0.2, gt=0.0, lt=1.0, description="Queries kept for stopping.")
    n_models: int = Field(3, ge=1, description="Rankers averaged, seeds seed .. seed + n - 1.")
    seed: int = Field(0, description="Initialisation, holdout and batching seed of the first.")


class _Model(nn.Module):
    def __init__(self, n_features: int, dim: int, config: CorrectionRankerConfig) -> None:
        super().__init__()
        self.dlrm = correction_dlrm(DLRMConfig(
            n_dense=n_features, n_sparse=N_SLOTS, dim=dim, bottom_mlp=config.bottom_mlp,
            top_mlp=config.top_mlp, log1p_dense=False, seed=config.seed,
        ))
        self.retriever_weight = nn.Parameter(torch.ones(()))

    def forward(
        self, dense: torch.Tensor, sparse: torch.Tensor, retriever: torch.Tensor
    ) -> torch.Tensor:
        """Scores ``[q, k]`` from ``dense [q, k, f]``, ``sparse [q, k, slots, d]``, ``[q, k]``."""
        q, k = retriever.shape
        correction = self.dlrm(dense.reshape(q * k, -1), sparse.reshape(q * k, N_SLOTS, -1))
        out: torch.Tensor = self.retriever_weight * retriever + correction.reshape(q, k)
        return out


class CorrectionRanker:
    """:class:`~models.lab.ranking.Ranker` learning a listwise correction to the retriever score."""

    name = "two_stage_dlrm"

    def __init__(self, config: CorrectionRankerConfig | None = None) -> None:
        self.config = config or CorrectionRankerConfig()
        self.chosen: dict[str, Any] = {}
        self._members: list[_Member] = []

    def fit(self, examples: RankingExamples) -> None:
        cfg = self.config
        self._members = [
            _Member(cfg.model_copy(update={"seed": cfg.seed + i}), examples)
            for i in range(cfg.n_models)
        ]
        self.chosen = {
            "models": cfg.n_models,
            "best_epochs": [m.best_epoch for m in self._members],
            "holdout_ndcg@10": [m.holdout_ndcg for m in self._members],
            "fit_queries": self._members[0].fit_queries,
        }

    def score(self, examples: RankingExamples) -> FloatArray:
        if not self._members:
            raise RuntimeError("score before fit")
        total = sum(m.score(examples) for m in self._members)
        scores: FloatArray = (np.asarray(total, dtype=np.float32) / len(self._members)).astype(
            np.float32)
        return scores


class _Member:
    """One correction model, trained on its own seed's holdout split."""

    def __init__(self, config: CorrectionRankerConfig, examples: RankingExamples) -> None:
        self.config = config
        torch.manual_seed(config.seed)
        fit_rows, holdout_rows = holdout_split(len(examples), config.holdout_share, config.seed)
        train, holdout = examples.subset(fit_rows), examples.subset(holdout_rows)
        valid = train.features[train.valid]
        self._mean = valid.mean(axis=0)
        self._std = np.maximum(valid.std(axis=0), 1e-6).astype(np.float32)
        dim = padded_width(examples.item_vectors.shape[1])
        self._model = _Model(examples.features.shape[2], dim, config)
        learnable = train.subset(train.with_target())
        self.fit_queries = len(learnable)
        self.best_epoch, self.holdout_ndcg = self._train(learnable, holdout)
        log.info("ranker=two_stage_dlrm seed=%d best_epoch=%d holdout_ndcg10=%.4f",
                 config.seed, self.best_epoch, self.holdout_ndcg)

    def _train(self, learnable: RankingExamples, holdout: RankingExamples) -> tuple[int, float]:
        """Epochs until the holdout NDCG@10 stops improving; keeps the best weights."""
        cfg = self.config
        optimizer = torch.optim.AdamW(self._model.parameters(), lr=cfg.lr,
                                      weight_decay=cfg.weight_decay)
        best, best_epoch = self._holdout_ndcg(holdout), 0
        state = copy.deepcopy(self._model.state_dict())
        rng = np.random.default_rng(cfg.seed)
        for epoch in range(1, cfg.epochs + 1):
            self._epoch(learnable, optimizer, rng)
            ndcg = self._holdout_ndcg(holdout)
            if ndcg > best:
                best, best_epoch, state = ndcg, epoch, copy.deepcopy(self._model.state_dict())
            elif epoch - best_epoch >= cfg.patience:
                break
        self._model.load_state_dict(state)
        return best_epoch, best

    def _epoch(
        self, examples: RankingExamples, optimizer: torch.optim.Optimizer,
        rng: np.random.Generator,
    ) -> None:
        if len(examples) == 0:
            return
        self._model.train()
        order = rng.permutation(len(examples))
        for lo in range(0, len(order), self.config.batch_queries):
            batch = examples.subset(np.sort(order[lo : lo + self.config.batch_queries]))
            logits = self._logits(batch)
            loss = F.cross_entropy(logits, torch.from_numpy(np.argmax(batch.labels, axis=1)))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()

    def _logits(self, examples: RankingExamples) -> torch.Tensor:
        dense = torch.from_numpy((examples.features - self._mean) / self._std)
        sparse = torch.from_numpy(_slots(examples, padded_width(examples.item_vectors.shape[1])))
        retriever = torch.from_numpy(examples.retriever_scores)
        logits = self._model(dense, sparse, retriever)
        masked: torch.Tensor = logits.masked_fill(~torch.from_numpy(examples.valid), -torch.inf)
        return masked

    def _holdout_ndcg(self, holdout: RankingExamples) -> float:
        if len(holdout) == 0:
            return 0.0
        return float(ndcg_at_10(reranked_ranks(self.score(holdout), holdout)).mean())

    def score(self, examples: RankingExamples) -> FloatArray:
        self._model.eval()
        with torch.no_grad():
            scores: FloatArray = self._logits(examples).numpy().astype(np.float32)
        return scores


def _slots(examples: RankingExamples, dim: int) -> FloatArray:
    """``[q, k, 3, dim]``: unit query, candidate and last-item vectors, zero-padded to dim."""
    table = unit_rows(examples.item_vectors)
    query = unit_rows(examples.query_vectors)
    q, k = examples.candidates.shape
    slots = np.zeros((q, k, N_SLOTS, dim), dtype=np.float32)
    width = table.shape[1]
    slots[:, :, 0, :width] = query[:, None, :]
    slots[:, :, 1, :width] = table[examples.candidates]
    slots[:, :, 2, :width] = table[examples.last_items][:, None, :]
    return slots
