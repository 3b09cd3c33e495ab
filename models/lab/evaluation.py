"""Offline evaluation: leave-one-out, full ranking, every model beside every baseline.

Protocol (stated in every report): per user, events sorted by time; the last event is the test
target, the second-to-last the validation target (see :mod:`models.sequences`). Models and
baselines are fitted on the training events only. Hyper-parameters (baseline grids, the
Transformer's early stopping) are chosen on validation NDCG@10; test metrics are computed once,
for the chosen setting. Each target is ranked against **all** items; with ``exclude_seen`` the
items already in the user's history are removed from the ranking (the target itself is never
in the history on ML-100K; on other data an already-seen target counts as a miss).

Any object with ``name``, ``fit(train, validation)`` and ``score(queries)`` is a
:class:`Recommender`; :func:`default_recommenders` lists the baselines and the Transformer.

Two-stage rows (:mod:`models.lab.two_stage`): the fitted Transformer's top-100 re-ranked by each of
:func:`default_rankers`, trained on the validation positions, compared paired with the
Transformer's own row.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd
import torch

from models.datasets import (
    ML100K_SHA256,
    load_interactions_csv,
    load_ml100k,
    load_ml100k_items,
    load_sequences,
    sha256_of,
)
from models.item_content import ItemContent
from models.lab.baselines import ItemKNN, Markov, Popularity, RecentPopularity
from models.lab.correction_ranker import CorrectionRanker, CorrectionRankerConfig
from models.lab.gbm_ranker import GBMRanker, GBMRankerConfig
from models.lab.ranking import Ranker
from models.lab.served_ranker import ServedRanker, ServedRankerConfig
from models.lab.session_recipe import fitted_to
from models.lab.two_stage import TOP_K, two_stage_rows
from models.metrics import exclude, metrics_from_ranks, target_ranks
from models.sequence_training import FitReport, SessionTrainer
from models.sequences import LeaveOneOutSplit, Queries, UserSequences, leave_one_out
from models.session_config import SessionTransformerConfig

log = logging.getLogger(__name__)
FloatArray = npt.NDArray[np.float32]
DAY_S = 86_400
BASELINES = ("popularity", "recent_popularity", "item_knn", "markov")
PROTOCOL = (
    "leave-one-out by time: last event = test, second-to-last = validation, rest = train; "
    "full ranking over all items; hyper-parameters chosen on validation NDCG@10"
)
SEEN_EXCLUDED = "; items already in the user's history excluded from the ranking"


class Recommender(Protocol):
    """A model under evaluation: fitted on training sequences, scores all items per query."""

    name: str

    def fit(self, train: UserSequences, validation: Queries) -> None: ...

    def score(self, queries: Queries) -> FloatArray: ...


class _Baseline(Protocol):
    name: str

    def fit(self, train: UserSequences) -> None: ...

    def score(self, queries: Queries) -> FloatArray: ...


@dataclass
class TunedBaseline:
    """Fits one baseline per grid point and keeps the best on validation NDCG@10."""

    name: str
    candidates: Sequence[Callable[[], _Baseline]]
    exclude_seen: bool = True
    chosen: dict[str, Any] = field(default_factory=dict)
    _best: _Baseline | None = None

    def fit(self, train: UserSequences, validation: Queries) -> None:
        best_ndcg = -1.0
        for make in self.candidates:
            model = make()
            model.fit(train)
            ndcg = evaluate_scores(model.score(validation), validation, self.exclude_seen)
            params = {k: v for k, v in vars(model).items() if not k.startswith("_")}
            log.info("baseline=%s params=%s val_ndcg10=%.4f", self.name, params, ndcg["ndcg@10"])
            if ndcg["ndcg@10"] > best_ndcg:
                best_ndcg, self._best = ndcg["ndcg@10"], model
                self.chosen = {"params": params, "val_ndcg@10": best_ndcg}

    def score(self, queries: Queries) -> FloatArray:
        if self._best is None:
            raise RuntimeError("score before fit")
        return self._best.score(queries)


class SessionTransformerRecommender:
    """Adapter running :class:`SessionTrainer` under the :class:`Recommender` protocol; the
    recipe's data-derived hyper-parameters (:mod:`models.lab.session_recipe`) are set from the
    training sequences it is fitted on."""

    def __init__(self, config: SessionTransformerConfig, name: str = "session_transformer") -> None:
        self.name = name
        self.config = config
        self.fitted_config = config
        self.trainer: SessionTrainer | None = None
        self.report: FitReport | None = None
        self.chosen: dict[str, Any] = {}

    def fit(self, train: UserSequences, validation: Queries) -> None:
        config = self.fitted_config = fitted_to(self.config, train)
        self.trainer = SessionTrainer(train.n_items, config)
        self.report = self.trainer.fit(train, validation)
        self.chosen = {
            "best_epoch": self.report.best_epoch,
            "epochs_run": self.report.epochs,
            "budget_epochs": config.epochs,
            "capped_at_epoch": self.report.capped_at_epoch,
            "val_ndcg@10": self.report.best_val_ndcg10,
            "examples": self.report.examples,
            "examples_per_s": self.report.examples / max(self.report.train_s, 1e-9),
            "examples_per_cpu_s": self.report.examples / max(self.report.train_cpu_s, 1e-9),
        }

    def score(self, queries: Queries) -> FloatArray:
        if self.trainer is None:
            raise RuntimeError("score before fit")
        return self.trainer.score(queries)


def default_recommenders(
    config: SessionTransformerConfig, exclude_seen: bool = True, baselines: bool = True
) -> list[Recommender]:
    """The four baselines (with their small validation grids) and the session Transformer, or
    the session Transformer alone without `baselines`."""
    if not baselines:
        return [SessionTransformerRecommender(config)]
    windows = (1, 3, 7, 14, 30, 90)
    decays = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3)
    recent: list[Callable[[], _Baseline]] = [
        partial(RecentPopularity, window_s=d * DAY_S) for d in windows
    ]
    knn: list[Callable[[], _Baseline]] = [partial(ItemKNN, recency_decay=r) for r in decays]
    return [
        TunedBaseline("popularity", [Popularity], exclude_seen),
        TunedBaseline("recent_popularity", recent, exclude_seen),
        TunedBaseline("item_knn", knn, exclude_seen),
        TunedBaseline("markov", [Markov], exclude_seen),
        SessionTransformerRecommender(config),
    ]


def default_rankers(config: SessionTransformerConfig) -> list[Ranker]:
    """The DLRM correction ranker, the LightGBM lambdarank baseline, and the served ranker
    (the logged DLRM over the serving feature set)."""
    return [
        CorrectionRanker(CorrectionRankerConfig(seed=config.seed)),
        GBMRanker(GBMRankerConfig(seed=config.seed, threads=max(1, config.threads))),
        ServedRanker(ServedRankerConfig(seed=config.seed)),
    ]


def evaluate_scores(scores: FloatArray, queries: Queries, exclude_seen: bool) -> dict[str, float]:
    """Metrics of a full score matrix against the queries' targets."""
    if exclude_seen:
        scores = exclude(scores, queries.histories)
    else:
        scores[:, 0] = -np.inf
    return metrics_from_ranks(target_ranks(scores, queries.targets))


def run_evaluation(
    split: LeaveOneOutSplit, recommenders: Sequence[Recommender], exclude_seen: bool = True
) -> dict[str, dict[str, Any]]:
    """Fits each recommender on the split and returns its test metrics and timings."""
    results: dict[str, dict[str, Any]] = {}
    for rec in recommenders:
        start, cpu_start = time.perf_counter(), time.process_time()
        rec.fit(split.train, split.validation)
        train_s = time.perf_counter() - start
        cpu_s = time.process_time() - cpu_start  # wall time inflates on a shared machine
        metrics = evaluate_scores(rec.score(split.test), split.test, exclude_seen)
        chosen = getattr(rec, "chosen", {})
        results[rec.name] = {
            **metrics, "train_s": round(train_s, 2), "train_cpu_s": round(cpu_s, 2),
            "selected": chosen,
        }
        log.info("model=%s ndcg10=%.4f train_s=%.1f", rec.name, metrics["ndcg@10"], train_s)
    return results


def seen_target_share(queries: Queries) -> float:
    """Share of test targets already in the user's history (always misses with exclusion)."""
    seen = [int(t) in set(h.tolist()) for h, t in zip(queries.histories, queries.targets,
                                                      strict=True)]
    return float(np.mean(seen)) if seen else 0.0


@dataclass(frozen=True)
class Dataset:
    """Interactions to evaluate on, with the name and digest a report records."""

    name: str
    frame: pd.DataFrame
    sha256: str


def load_frame(
    dataset: str | None, interactions: Path | None = None, sequences: Path | None = None
) -> Dataset:
    """The named built-in dataset, a ``user_id,item_id,timestamp`` CSV, or a one-line-per-user
    sequence file (see :mod:`models.datasets`); exactly one of them."""
    if sum(x is not None for x in (dataset, interactions, sequences)) != 1:
        raise ValueError("need exactly one of a dataset name, an interactions CSV, a sequence file")
    if dataset is not None:
        if dataset != "ml-100k":
            raise ValueError(f"unknown dataset {dataset!r}; known: ml-100k")
        return Dataset(dataset, load_ml100k(), ML100K_SHA256)
    if interactions is not None:
        return Dataset(str(interactions), load_interactions_csv(interactions),
                       sha256_of(interactions))
    assert sequences is not None
    return Dataset(sequences.stem, load_sequences(sequences), sha256_of(sequences))


def load_items(dataset: str | None) -> pd.DataFrame | None:
    """Item content of a built-in dataset (genres, release year); None for a CSV."""
    return load_ml100k_items() if dataset == "ml-100k" else None


def evaluate_dataset(
    name: str, frame: pd.DataFrame, config: SessionTransformerConfig, exclude_seen: bool = True,
    items: pd.DataFrame | None = None, rankers: Sequence[Ranker] | None = None,
    sha256: str | None = None, baselines: bool = True,
) -> dict[str, Any]:
    """Full evaluation report (the ``streamrec eval`` JSON); ``items`` is the item content
    (``item_id``, ``release_year``, ``genres``) the rankers' content features read; without
    ``baselines`` only the session Transformer (and the rankers) are trained."""
    started, cpu_started = time.perf_counter(), time.process_time()
    load_at_start = os.getloadavg()[0]
    if config.threads:
        torch.set_num_threads(config.threads)
    split = leave_one_out(frame)
    if len(split.test.targets) == 0:
        raise ValueError("no user has the 3+ events leave-one-out needs")
    content = (ItemContent.from_frame(items, split.item_ids) if items is not None
               else ItemContent.empty(split.train.n_items))
    recommenders = default_recommenders(config, exclude_seen, baselines)
    results = run_evaluation(split, recommenders, exclude_seen)
    transformer = next(r for r in recommenders if isinstance(r, SessionTransformerRecommender))
    if transformer.trainer is None:
        raise RuntimeError("the session Transformer was not fitted")
    rankers = default_rankers(config) if rankers is None else rankers
    two_stage: dict[str, Any] | None = None
    if rankers:  # the candidates' features cost a full scoring of four query sets
        rows, two_stage = two_stage_rows(
            split, transformer.trainer, content, rankers, exclude_seen, TOP_K, config.seed
        )
        results["session_transformer"][f"recall@{TOP_K}"] = two_stage[f"recall@{TOP_K}"]
        results.update(rows)
    fitted = transformer.chosen
    return {
        "dataset": name,
        "dataset_sha256": sha256,
        "protocol": PROTOCOL + (SEEN_EXCLUDED if exclude_seen else ""),
        "exclude_seen": exclude_seen,
        "n_users_evaluated": len(split.test.targets),
        "n_items": split.train.n_items,
        "n_interactions": len(frame),
        "seen_test_targets": seen_target_share(split.test),
        "seed": config.seed,
        "session_transformer_config": transformer.fitted_config.model_dump(),
        "models": results,
        "session_transformer_margin": margin_over_baselines(results),
        "two_stage": two_stage,
        "wall_s": round(time.perf_counter() - started, 1),
        # CPU seconds of every thread of this process: what the run costs, whatever the load.
        "cpu_s": round(time.process_time() - cpu_started, 1),
        "examples_per_s": round(fitted["examples_per_s"], 1),
        "session_transformer_budget": {
            "epochs": fitted["budget_epochs"], "epochs_run": fitted["epochs_run"],
            "best_epoch": fitted["best_epoch"], "wall_cap_s": config.time_budget_s,
            "capped_by_wall_clock": fitted["capped_at_epoch"] is not None,
            "capped_at_epoch": fitted["capped_at_epoch"],
        },
        "torch_threads": torch.get_num_threads(),
        # A shared machine's wall times are inflated: the load says by how much.
        "host_load_avg_1m_at_start": round(load_at_start, 2),
        "host_load_avg_1m_at_end": round(os.getloadavg()[0], 2),
    }


def margin_over_baselines(
    results: dict[str, dict[str, Any]], model: str = "session_transformer"
) -> dict[str, Any] | None:
    """Relative NDCG@10 gain of ``model`` over the strongest baseline."""
    baselines = {k: v for k, v in results.items() if k in BASELINES}
    if model not in results or not baselines:
        return None
    best = max(baselines, key=lambda k: float(baselines[k]["ndcg@10"]))
    base = float(baselines[best]["ndcg@10"])
    gain = float(results[model]["ndcg@10"]) / base - 1.0 if base > 0 else float("inf")
    return {"best_baseline": best, "relative_ndcg@10": gain}
