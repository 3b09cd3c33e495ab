"""Full retrain: from replayed history to a validated model of a new major version.

The id space of the online model is kept and extended (rows never move), so `warm` mode can
start from the current weights; `scratch` starts from a fresh initialisation. Validation is the
most recent slice: each user's chronologically last event, ranked against all items, with the
model trained on everything before it. The version serving when the retrain began is scored on
the same queries (`incumbent`), so that a retrain can be judged against what it would replace.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from models.sequence_training import FitReport, SessionTrainer
from models.sequences import Queries, UserSequences
from models.session_config import SessionTransformerConfig
from online_trainer.histories import UserHistories
from online_trainer.online_model import Interaction, OnlineModel
from online_trainer.vocabulary import IdVocabulary

logger = logging.getLogger(__name__)

Mode = Literal["scratch", "warm"]


@dataclass(frozen=True)
class RetrainResult:
    model: OnlineModel
    report: FitReport
    validation: dict[str, float]
    shared: tuple[dict[str, float], dict[str, float]] | None = None
    """(retrained, serving version) on the validation queries both can score (None: no serving
    version was given, or no query is within its rows)."""

    def beats_incumbent(self) -> bool:
        """NDCG@10 at least the serving version's on the shared queries (True without one)."""
        if self.shared is None:
            return True
        mine, theirs = self.shared
        return mine.get("ndcg@10", 0.0) >= theirs.get("ndcg@10", 0.0)


def split_recent(
    interactions: list[Interaction], items: IdVocabulary
) -> tuple[UserSequences, Queries, dict[str, tuple[list[int], list[int]]]]:
    """Per-user sequences (all but the last event) and the last events as validation queries.

    Ids are admitted first, over the whole window, and events mapped to rows afterwards: with a
    bounded vocabulary a row may be recycled during admission, and a sequence must only hold
    rows that mean the same item in the final mapping. Events of ids left without a row (too
    rare, or evicted) are left out."""
    ordered = sorted(interactions, key=lambda e: e.timestamp)
    items.admit_all(e.item for e in ordered)
    by_user: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for event in ordered:
        row = items.get(event.item)
        seq, ts = by_user[event.user]
        if not row or (seq and seq[-1] == row):
            continue
        seq.append(row)
        ts.append(event.timestamp)
    train_items, train_times, hist, hist_t, targets, qtimes = [], [], [], [], [], []
    for seq, ts in by_user.values():
        cut = len(seq) - 1 if len(seq) >= 3 else len(seq)
        train_items.append(np.asarray(seq[:cut], dtype=np.int64))
        train_times.append(np.asarray(ts[:cut], dtype=np.int64))
        if cut < len(seq):
            hist.append(train_items[-1])
            hist_t.append(train_times[-1])
            targets.append(seq[-1])
            qtimes.append(ts[-1])
    queries = Queries(
        hist, hist_t, np.asarray(qtimes, dtype=np.int64), np.asarray(targets, dtype=np.int64)
    )
    return UserSequences(train_items, train_times, len(items)), queries, dict(by_user)


def full_retrain(
    interactions: list[Interaction],
    current: OnlineModel,
    config: SessionTransformerConfig,
    mode: Mode = "scratch",
    max_users: int = 1_000_000,
    trainer_factory: Callable[[int, SessionTransformerConfig], SessionTrainer] = SessionTrainer,
    incumbent: OnlineModel | None = None,
) -> RetrainResult:
    items = current.items.copy()
    train, validation, sequences = split_recent(interactions, items)
    recycled = set(items.take_recycled())
    model = OnlineModel(
        config, items, UserHistories(config.max_len, max_users), max_users, current.context
    )
    # fit() sizes its item initialisation to the catalog: the table is exactly the catalog here,
    # and gets its growth headroom back after training.
    model.trainer = trainer_factory(len(items), config)
    if mode == "warm":
        _copy_known_rows(current, model, config, recycled)
    report = model.trainer.fit(train, validation if len(validation.targets) else None)
    model.ensure_capacity()
    metrics = model.trainer.evaluate(validation) if len(validation.targets) else {}
    for user, (seq, ts) in sequences.items():
        for row, t in zip(seq, ts, strict=True):
            model.histories.append(user, row, t)
    logger.info(
        "retrained mode=%s events=%d users=%d epochs=%d val=%s",
        mode,
        len(interactions),
        len(sequences),
        report.epochs,
        metrics,
    )
    shared = _against(model, incumbent, validation) if incumbent is not None else None
    if shared is not None:
        logger.info("retrain against serving retrained=%s serving=%s", *shared)
    return RetrainResult(model, report, metrics, shared)


def _against(
    model: OnlineModel, incumbent: OnlineModel, validation: Queries
) -> tuple[dict[str, float], dict[str, float]] | None:
    """Both models on the validation queries whose rows the serving version has (rows never
    move, so a row below its table means the same item to both; newer rows it cannot score)."""
    rows = incumbent.trainer.model.n_items
    keep = np.array([i for i, (h, t) in enumerate(zip(validation.histories, validation.targets,
                                                      strict=True))
                     if t < rows and (len(h) == 0 or int(h.max()) < rows)], dtype=np.int64)
    if len(keep) == 0:
        return None
    subset = Queries([validation.histories[i] for i in keep],
                     [validation.history_times[i] for i in keep],
                     validation.query_times[keep], validation.targets[keep])
    return model.trainer.evaluate(subset), incumbent.trainer.evaluate(subset)


def _copy_known_rows(
    current: OnlineModel,
    model: OnlineModel,
    config: SessionTransformerConfig,
    recycled: set[int],
) -> None:
    """Warm start: every weight of the current model, item rows for the ids it already knew
    (rows never move, so row r means the same item in both unless it was recycled for another
    id); new ids keep their initialisation. The spectral item initialisation would overwrite the
    warm rows, so it is switched off."""
    model.trainer.config = config.model_copy(update={"spectral_init": False})
    source = current.tensors()
    target = model.trainer.model.state_dict()
    for name, tensor in source.items():
        if name in {"item_embedding.weight", "item_bias"}:
            rows = min(len(tensor), len(target[name]))
            fresh = target[name][sorted(r for r in recycled if r < rows)].clone()
            target[name][:rows] = tensor[:rows]
            target[name][sorted(r for r in recycled if r < rows)] = fresh
        elif name in target and target[name].shape == tensor.shape:
            target[name].copy_(tensor)
    model.trainer.model.load_state_dict(target)
