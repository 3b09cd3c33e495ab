"""The model the trainer keeps learning: a session Transformer plus its id space and histories.

Per micro-batch (events in partition order):
1. `queries(batch, share)` then `ranks`: point-in-time queries (each event sees only the events
   before it, including earlier events of the same batch) for the events in the prequential
   sample -> full-catalog rank of the true item;
2. `learn(batch)`: admit new ids (grow the tables, keeping rows and optimiser moments; reset the
   rows the bounded vocabulary recycled), append the events to the histories, take optimisation
   steps on the touched users' sequences. An event whose item has no row yet (fewer sightings
   than the vocabulary's `min_count`) is neither history nor target.
A repeat of the user's previous item (view -> click of the same item) is no next-item example:
it extends neither the history nor the metrics.
"""

from __future__ import annotations

import copy
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from models.sequence_training import SessionTrainer
from models.session_config import SessionTransformerConfig
from online_trainer.histories import IntArray, UserHistories
from online_trainer.prequential import MISS, in_sample
from online_trainer.vocabulary import IdVocabulary

_GROW_CHUNK = 1024
"""New item rows are allocated in chunks so a stream of new ids does not regrow every batch."""


@dataclass(frozen=True)
class Interaction:
    """What the trainer needs of an InteractionEvent."""

    user: str
    item: str
    timestamp: int


@dataclass(frozen=True)
class Query:
    history: IntArray
    times: IntArray
    target: int
    """Item row, 0 when the item was unknown when the event happened."""


@dataclass
class _Working:
    """A user's history while `queries` walks a batch: the stored one, then the batch's events."""

    items: list[int]
    times: list[int]
    last: int
    """The previous item row (0: none, or a row recycled since)."""


class OnlineModel:
    def __init__(
        self,
        config: SessionTransformerConfig,
        vocabulary: IdVocabulary | None = None,
        histories: UserHistories | None = None,
        max_users: int = 1_000_000,
        context: int | None = None,
    ) -> None:
        self.config = config
        # The scorer encodes the last 50 events the feature store keeps; scoring and learning on
        # the same context length keeps prequential figures honest and the step cost bounded.
        self.context = min(context or config.max_len, config.max_len)
        self.train_context = self.context
        """Events each learning step attends to; may exceed `context` (see `tune_online`)."""
        # `is None`, not `or`: an empty vocabulary is falsy and still carries its limits.
        self.items = IdVocabulary() if vocabulary is None else vocabulary
        if histories is None:
            histories = UserHistories(config.max_len, max_users)
        self.histories = histories
        self.trainer = SessionTrainer(max(len(self.items), 1) + _GROW_CHUNK, config)

    # -- prequential scoring ------------------------------------------------------------------

    def queries(self, batch: Sequence[Interaction], share: float = 1.0) -> list[Query]:
        """Point-in-time queries for the batch's events in the prequential sample of ``share``
        (:func:`online_trainer.prequential.in_sample`), without changing any state."""
        # Each user's stored history is read once per batch; the batch's earlier events of the
        # user are appended to a working copy as the loop passes them.
        working: dict[str, _Working] = {}
        out = []
        for event in batch:
            user = working.get(event.user)
            if user is None:
                items, times = self.histories.get(event.user)
                user = working[event.user] = _Working(
                    items.tolist(), times.tolist(), self.histories.last_item(event.user)
                )
            target = self.items.get(event.item)
            if target and target == user.last:
                continue
            if user.items and in_sample(event.user, event.item, event.timestamp, share):
                out.append(Query(
                    np.array(user.items[-self.context :], dtype=np.int64),
                    np.array(user.times[-self.context :], dtype=np.int64),
                    target,
                ))
            user.items.append(target)
            user.times.append(event.timestamp)
            user.last = target
        return out

    @torch.no_grad()
    def ranks(self, queries: Sequence[Query]) -> list[float]:
        """Full-catalog rank of each target among known items (already-seen items excluded)."""
        known = [q for q in queries if q.target]
        result = {id(q): MISS for q in queries}
        if known:
            vectors = self.trainer.encode_histories(
                [q.history for q in known], [q.times for q in known]
            )
            logits = self.trainer.model.logits(vectors).float()
            logits[:, 0] = -math.inf
            logits[:, len(self.items) + 1 :] = -math.inf  # rows allocated but never admitted
            seen = [q.history[q.history != q.target] for q in known]
            rows = np.repeat(np.arange(len(known)), [len(s) for s in seen])
            logits[torch.from_numpy(rows), torch.from_numpy(np.concatenate(seen))] = -math.inf
            target_scores = logits[torch.arange(len(known)), [q.target for q in known]]
            ranks = (logits > target_scores[:, None]).sum(dim=1) + 1
            for q, rank in zip(known, ranks.tolist(), strict=True):
                result[id(q)] = float(rank)
        return [result[id(q)] for q in queries]

    # -- learning -----------------------------------------------------------------------------

    def learn(self, batch: Sequence[Interaction], steps: int = 1) -> float:
        """Admit ids, extend histories, then train on the events that just arrived, each with
        its user's preceding events as context.

        Only the new events are targets: re-learning a user's older events with every new one
        over-weights old events (each would be learned up to `context` times) and measured worse
        on ML-100K's second half (see online_trainer.settings.train_context_events)."""
        rows = self.admit(batch)
        touched: dict[str, int] = {}
        for event, row in zip(batch, rows, strict=True):
            if not row or self.histories.last_item(event.user) == row:
                continue
            self.histories.append(event.user, row, event.timestamp)
            touched[event.user] = touched.get(event.user, 0) + 1
        if steps == 0:
            return math.nan
        n = self.train_context
        sequences = [self.histories.get(user) for user in touched]
        items, times = [s[-n:] for s, _ in sequences], [t[-n:] for _, t in sequences]
        loss = math.nan
        for _ in range(steps):
            loss = self.trainer.partial_fit(items, times, list(touched.values()))
        return loss

    def admit(self, batch: Sequence[Interaction]) -> list[int]:
        """Admits the batch's item ids (growing or recycling rows); returns each event's row."""
        rows = self.items.admit_all(e.item for e in batch)
        self.ensure_capacity()
        return rows

    def tune_online(
        self, train_context: int, dense_lr: float | None, item_lr: float | None
    ) -> None:
        """Online-phase settings, applied after every load or retrain (an optimiser state
        restored from a checkpoint or left by an offline schedule carries its own rates)."""
        self.train_context = min(train_context, self.config.max_len)
        groups = self.trainer.optimizer.param_groups  # [dense, item table] (SessionTrainer)
        for group, lr in zip(groups, (dense_lr, item_lr), strict=True):
            if lr is not None:
                group["lr"] = lr

    def ensure_capacity(self) -> None:
        """Rows for every admitted id; recycled rows start afresh in the model and histories."""
        if len(self.items) + 1 > self.trainer.model.n_items:
            bound = self.items.limits.max_rows
            self.trainer.grow_items(min(len(self.items) + _GROW_CHUNK, bound))
        recycled = sorted(self.items.take_recycled())
        if recycled:
            self.trainer.reset_items(recycled)
            self.histories.forget_rows(recycled)

    # -- snapshots ----------------------------------------------------------------------------

    def frozen_copy(self, optimizer_state: bool = True) -> OnlineModel:
        """An independent copy (weights, ids, histories), e.g. a benchmark's frozen model.
        Without `optimizer_state` the copy's optimizer starts empty, as a fresh one does: a
        model that never steps needs no moments, and copying them is most of the cost."""
        twin = self.weights_copy(optimizer_state)
        twin.histories = self.histories.copy()
        return twin

    def weights_copy(self, optimizer_state: bool = False) -> OnlineModel:
        """A copy of the weights and the id space, with no histories: the gate's serving
        baseline, which scores the candidate's own queries (:meth:`ranks`) and only follows
        the ids the candidate admits (:meth:`admit`), so its rows stay the candidate's."""
        twin = copy.copy(self)  # keeps config and context
        twin.items = self.items.copy()
        twin.histories = UserHistories(self.histories.max_len, self.histories.max_users)
        state = self.trainer.optimizer.state
        memo: dict[int, object] = {} if optimizer_state else {id(state): defaultdict(dict)}
        twin.trainer = copy.deepcopy(self.trainer, memo)
        return twin

    def tensors(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu() for k, v in self.trainer.model.state_dict().items()}

    def load_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        rows = tensors["item_embedding.weight"].shape[0] - 1
        if rows != self.trainer.model.n_items:
            # A fresh trainer of the stored size: the optimiser state loaded next must match it.
            self.trainer = SessionTrainer(rows, self.config)
        self.trainer.model.load_state_dict(tensors)
