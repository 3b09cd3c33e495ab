"""The DLRM correction ranker over logged serving features, trained incrementally, and its gate.

Training data are `ranker.examples` (schemas.ranker_examples): per answer, the shown candidates'
serving feature vectors (models.point_in_time.SERVING_FEATURE_NAMES, column 0 the retriever
score) and graded labels. The score is ``a * retriever_score + dlrm(standardised features)``
as in models.lab.correction_ranker: the correction's output layer starts at zero and ``a`` at one,
so an untrained ranker orders exactly as retrieval does. The DLRM's sparse slot is the
standardised feature vector itself (zero-padded to the embedding width): the logged record
carries no id vectors, so the dot interactions cross the bottom MLP's output with the raw
features. The loss is listwise: softmax cross-entropy against the grades normalised over the
list; lists without a positive grade carry no ranking signal and are skipped.

`partial_fit` takes one micro-batch (the online trainer's unit); feature scales are running
means and variances over every list seen. On CUDA (models.accelerators) training steps run under
bf16 autocast and scoring replays CUDA graphs, one per row-count bucket (a scorer's micro-batch
of candidates is padded up to the next bucket); on CPU both are plain fp32 eager calls.
The gate (:func:`gate`) compares graded NDCG@10 on held-back recent lists with plain retrieval
order; a ranker that does not beat it by `min_gain` is not promoted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from models.accelerators import BucketedGraphs, autocast_context, default_device
from models.embeddings import padded_width
from models.ranker import DLRMConfig, correction_dlrm

FloatArray = npt.NDArray[np.float32]
RETRIEVER_COLUMN = 0
"""The retriever's score: the serving feature set's first column."""
SCORE_BUCKETS = tuple(2**k for k in range(6, 14))
"""Row counts of the CUDA graphs that score (64 to 8,192 candidates); more rows run eagerly."""


@dataclass(frozen=True)
class GradedList:
    """One answer's shown candidates: ``vectors [n, n_features]`` and ``grades [n]``."""

    vectors: FloatArray
    grades: npt.NDArray[np.int64]


class LoggedRankerConfig(BaseModel):
    """Size and optimisation of :class:`LoggedRanker`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bottom_mlp: tuple[int, ...] = Field((32,), description="Hidden widths of the dense MLP.")
    top_mlp: tuple[int, ...] = Field((32, 16), description="Hidden widths of the top MLP.")
    lr: float = Field(3e-3, gt=0.0, description="AdamW learning rate.")
    weight_decay: float = Field(1e-4, ge=0.0, description="AdamW decoupled weight decay.")
    steps_per_batch: int = Field(4, ge=1, description="Optimiser steps per micro-batch.")
    seed: int = Field(0, description="Initialisation seed.")


class _Model(nn.Module):
    def __init__(self, n_features: int, config: LoggedRankerConfig) -> None:
        super().__init__()
        self.width = padded_width(n_features)
        self.dlrm = correction_dlrm(DLRMConfig(
            n_dense=n_features, n_sparse=1, dim=self.width, bottom_mlp=config.bottom_mlp,
            top_mlp=config.top_mlp, log1p_dense=False, seed=config.seed,
        ))
        self.retriever_weight = nn.Parameter(torch.ones(()))

    def forward(self, standardised: torch.Tensor, retriever: torch.Tensor) -> torch.Tensor:
        """Scores ``[n]`` from ``standardised [n, f]`` features and raw retriever ``[n]``."""
        slot = standardised.new_zeros(standardised.shape[0], 1, self.width)
        slot[:, 0, : standardised.shape[1]] = standardised
        out: torch.Tensor = self.retriever_weight * retriever + self.dlrm(standardised, slot)
        return out


class LoggedRanker:
    """Scores candidates from their serving feature vectors; higher is better."""

    name = "logged_dlrm"

    def __init__(
        self, n_features: int, config: LoggedRankerConfig | None = None,
        device: torch.device | None = None, score_buckets: Sequence[int] = SCORE_BUCKETS,
    ) -> None:
        """`score_buckets`: the row counts scored by CUDA-graph replay (empty: always eager)."""
        self.config = config or LoggedRankerConfig()
        self.n_features = n_features
        self.device = device or default_device()
        self.model = _Model(n_features, self.config).to(self.device)
        self._graphs = BucketedGraphs(self.model, pad_values=(0.0, 0.0), buckets=score_buckets)
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=self.config.lr, weight_decay=self.config.weight_decay
        )
        self.seen_rows = 0
        self._mean = np.zeros(n_features, dtype=np.float64)
        self._m2 = np.zeros(n_features, dtype=np.float64)
        self.lists_trained = 0

    def partial_fit(self, lists: Sequence[GradedList]) -> float:
        """One micro-batch: updates the feature scales, then a few listwise steps; returns the
        last step's mean loss (NaN when no list had a positive grade)."""
        for item in lists:
            self._observe(item.vectors)
        learnable = [item for item in lists if item.grades.max(initial=0) > 0]
        if not learnable:
            return float("nan")
        self.model.train()
        standardised, retriever, target, valid = self._padded(learnable)
        loss = torch.zeros(())
        for _ in range(self.config.steps_per_batch):
            with autocast_context(self.device):
                scores = self.model(
                    standardised.reshape(-1, self.n_features), retriever.reshape(-1)
                )
            scores = scores.float().reshape(valid.shape).masked_fill(~valid, -torch.inf)
            log_p = torch.log_softmax(scores, dim=1).masked_fill(~valid, 0.0)
            loss = -(target * log_p).sum(dim=1).mean()
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            self.optimizer.step()
        self.lists_trained += len(learnable)
        return float(loss.detach())

    def _padded(
        self, lists: Sequence[GradedList]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``[b, n, f]`` standardised features, ``[b, n]`` retriever scores, grade targets
        (summing to one per list) and the mask of real rows: one forward pass per step."""
        width = max(len(item.grades) for item in lists)
        features = np.zeros((len(lists), width, self.n_features), dtype=np.float32)
        grades = np.zeros((len(lists), width), dtype=np.float32)
        valid = np.zeros((len(lists), width), dtype=np.bool_)
        for row, item in enumerate(lists):
            features[row, : len(item.grades)] = item.vectors
            grades[row, : len(item.grades)] = item.grades
            valid[row, : len(item.grades)] = True
        standardised = ((features - self._mean) / self._std()).astype(np.float32)
        return (
            self._on_device(standardised),
            self._on_device(features[:, :, RETRIEVER_COLUMN].copy()),
            self._on_device(grades / grades.sum(axis=1, keepdims=True)),
            self._on_device(valid),
        )

    def _on_device(self, array: npt.NDArray[np.generic]) -> torch.Tensor:
        return torch.from_numpy(array).to(self.device, non_blocking=True)

    def _observe(self, vectors: FloatArray) -> None:
        """Welford's running mean and variance, batch form (Chan et al.)."""
        n = len(vectors)
        if n == 0:
            return
        batch_mean = vectors.mean(axis=0, dtype=np.float64)
        batch_m2 = ((vectors - batch_mean) ** 2).sum(axis=0, dtype=np.float64)
        total = self.seen_rows + n
        delta = batch_mean - self._mean
        self._mean = self._mean + delta * n / total
        self._m2 = self._m2 + batch_m2 + delta**2 * self.seen_rows * n / total
        self.seen_rows = total

    def _std(self) -> npt.NDArray[np.float64]:
        variance = self._m2 / max(self.seen_rows, 1)
        std: npt.NDArray[np.float64] = np.maximum(np.sqrt(variance), 1e-6)
        return std

    def score(self, vectors: FloatArray) -> FloatArray:
        """``[n]`` scores of ``vectors [n, n_features]``."""
        self.model.eval()
        standardised = ((vectors - self._mean) / self._std()).astype(np.float32)
        with torch.no_grad():
            out = self._graphs(
                self._on_device(standardised),
                self._on_device(vectors[:, RETRIEVER_COLUMN].astype(np.float32)),
            )
            scores: FloatArray = out.float().cpu().numpy()
        return scores

    def capture(self) -> None:
        """On CUDA, captures every scoring graph now, so a newly served version's first
        requests pay no capture; nothing on CPU."""
        if self.device.type != "cuda":
            return
        self.model.eval()
        row = self._on_device(np.zeros((1, self.n_features), dtype=np.float32))
        with torch.no_grad():
            self._graphs.capture(row, row[:, RETRIEVER_COLUMN].contiguous())

    def tensors(self) -> dict[str, torch.Tensor]:
        """Weights and feature scales: what a stored ranker version holds (models.store)."""
        state = {
            f"model.{k}": v.detach().cpu().clone() for k, v in self.model.state_dict().items()
        }
        state["scale.mean"] = torch.from_numpy(self._mean.copy())
        state["scale.m2"] = torch.from_numpy(self._m2.copy())
        state["scale.seen_rows"] = torch.tensor([self.seen_rows], dtype=torch.int64)
        return state

    def manifest_config(self) -> dict[str, object]:
        return {"n_features": self.n_features, "ranker": self.config.model_dump(mode="json")}

    @classmethod
    def from_tensors(
        cls, tensors: dict[str, torch.Tensor], config: dict[str, object],
        device: torch.device | None = None,
    ) -> LoggedRanker:
        """The ranker :meth:`tensors` and :meth:`manifest_config` describe, on `device`."""
        settings = config.get("ranker")
        n_features = config.get("n_features")
        if not isinstance(settings, dict) or not isinstance(n_features, int):
            raise ValueError("not a logged ranker's manifest config")
        ranker = cls(n_features, LoggedRankerConfig(**settings), device)
        ranker.model.load_state_dict(
            {k.removeprefix("model."): v for k, v in tensors.items() if k.startswith("model.")}
        )
        ranker._mean = tensors["scale.mean"].numpy().astype(np.float64)
        ranker._m2 = tensors["scale.m2"].numpy().astype(np.float64)
        ranker.seen_rows = int(tensors["scale.seen_rows"][0])
        return ranker


def graded_ndcg_at_10(lists: Sequence[GradedList], scores: Sequence[FloatArray]) -> float:
    """Mean NDCG@10 with gains ``2**grade - 1`` over the lists that hold a positive grade
    (ties broken by list position, the retrieval order); NaN when none does."""
    values = _per_list_ndcg(lists, scores)
    return float(values.mean()) if len(values) else float("nan")


def _per_list_ndcg(
    lists: Sequence[GradedList], scores: Sequence[FloatArray]
) -> npt.NDArray[np.float64]:
    values = []
    for item, score in zip(lists, scores, strict=True):
        gains = (2.0 ** item.grades.astype(np.float64)) - 1.0
        if gains.max(initial=0.0) <= 0:
            continue
        order = np.argsort(-score, kind="stable")[:10]
        discounts = 1.0 / np.log2(np.arange(2, len(order) + 2))
        ideal = np.sort(gains)[::-1][:10]
        values.append(float((gains[order] * discounts).sum() / (ideal * discounts).sum()))
    return np.asarray(values, dtype=np.float64)


@dataclass(frozen=True)
class GateDecision:
    promote: bool
    ranker_ndcg: float
    retrieval_ndcg: float
    lists: int
    """Held-back lists with a positive grade the decision rests on."""
    reason: str


def gate(
    ranker: LoggedRanker, held_back: Sequence[GradedList], min_gain: float = 0.0,
    min_lists: int = 50, z: float = 2.5,
) -> GateDecision:
    """Promote only when the ranker's graded NDCG@10 on `held_back` beats retrieval order (the
    retriever score column) by more than `min_gain` and by more than `z` standard errors of the
    paired per-list difference, over at least `min_lists` lists that hold a positive grade: a
    few hundred lists are noisy, and a ranker that only fits noise must not pass by luck. The
    trainer looks again every few micro-batches, so one look's chance of a false pass must be
    small: about 1 in 44 at 2 standard errors (a few dozen looks would likely pass one), 1 in
    160 at 2.5."""
    positive = [item for item in held_back if item.grades.max(initial=0) > 0]
    ranked = _per_list_ndcg(positive, [ranker.score(i.vectors) for i in positive])
    retrieval = _per_list_ndcg(positive, [i.vectors[:, RETRIEVER_COLUMN] for i in positive])
    n = len(positive)
    ranked_mean = float(ranked.mean()) if n else float("nan")
    retrieval_mean = float(retrieval.mean()) if n else float("nan")
    if n < max(min_lists, 2):
        return GateDecision(False, ranked_mean, retrieval_mean, n,
                            f"held back {n} labelled lists, need {max(min_lists, 2)}")
    difference = ranked - retrieval
    error = float(difference.std(ddof=1)) / np.sqrt(n)
    if not float(difference.mean()) > max(min_gain, z * error):
        return GateDecision(False, ranked_mean, retrieval_mean, n,
                            "does not beat retrieval order")
    return GateDecision(True, ranked_mean, retrieval_mean, n, "beats retrieval order")
