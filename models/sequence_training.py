"""Training and scoring loop of the session Transformer.

:class:`SessionTrainer` owns a :class:`~models.session_transformer.SessionTransformer`, its
AdamW optimizer and learning-rate schedule:

- ``fit(train, validation)``: offline training over chronological sequences, next-item
  prediction at every position (sampled or full softmax, :mod:`models.softmax_loss`; a prefix's
  own items are never its negatives); validation NDCG@10 on the held-out
  second-to-last item every ``eval_every`` epochs, early stopping, best weights restored.
- ``partial_fit(items, times)``: one optimisation step on a micro-batch of (already index
  encoded) sequences; the online trainer calls it after admitting new ids with ``grow_items``.
- ``encode_histories(histories, times)`` -> query vectors; ``score(queries)`` -> full-catalog
  score matrix; ``evaluate(queries)`` -> metrics, a batch of queries at a time.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from models.accelerators import autocast_context, default_device
from models.embeddings import grow_optimizer_state, reset_optimizer_rows
from models.item_init import spectral_item_vectors
from models.metrics import NEVER, metrics_from_ranks
from models.sequences import Queries, UserSequences
from models.session_config import SessionTransformerConfig
from models.session_transformer import SessionTransformer
from models.softmax_loss import (
    catalog_cross_entropy,
    dropped_rows,
    sampled_cross_entropy,
    seen_pairs,
    table_rows,
    uniform_negatives,
)

log = logging.getLogger(__name__)
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Batch:
    """Left-aligned, right-padded tensors ``[batch, length]`` (0 = padding)."""

    items: torch.Tensor
    gaps: torch.Tensor
    targets: torch.Tensor  # [batch, length]: the next item at each position (0 = none)


@dataclass
class FitReport:
    """What ``fit`` did: epochs run, best epoch and validation metric, throughput."""

    epochs: int
    best_epoch: int
    best_val_ndcg10: float
    train_s: float
    examples: int
    history: list[tuple[int, float, float]]  # (epoch, seconds since start, val ndcg@10)
    capped_at_epoch: int | None = None
    """The epoch after which the wall-clock safety cap stopped training (None: it did not)."""
    train_cpu_s: float = 0.0
    """CPU seconds of the process (all threads) during fit: the cost whatever the host load."""


def _gaps(times: IntArray) -> IntArray:
    gaps = np.empty_like(times)
    gaps[0] = -1
    gaps[1:] = np.diff(times)
    return gaps


def _window(n: int, max_len: int, rng: np.random.Generator | None) -> tuple[int, int]:
    """Input slice ``[start, end)`` of a sequence of n events predicting ``end``."""
    end = n - 1
    if rng is not None and end > max_len:
        end = int(rng.integers(max_len, end + 1))
    return max(0, end - max_len), end


def make_batch(
    items: list[IntArray], times: list[IntArray], max_len: int,
    rng: np.random.Generator | None = None,
) -> Batch:
    """Training batch: inputs ``s[:-1]``, the next item ``s[t+1]`` as each position's target."""
    windows = [_window(len(s), max_len, rng) for s in items]
    length = max([1, *(end - start for start, end in windows)])
    x = np.zeros((len(items), length), dtype=np.int64)
    g = np.full((len(items), length), -1, dtype=np.int64)
    y = np.zeros((len(items), length), dtype=np.int64)
    for row, (seq, ts, (start, end)) in enumerate(zip(items, times, windows, strict=True)):
        n = end - start
        x[row, :n] = seq[start:end]
        g[row, :n] = _gaps(ts)[start:end]
        y[row, :n] = seq[start + 1 : end + 1]
    return Batch(torch.from_numpy(x), torch.from_numpy(g), torch.from_numpy(y))


def history_batch(
    histories: list[IntArray], times: list[IntArray], max_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Encoder inputs for queries: the last ``max_len`` history events, left-aligned."""
    length = max(1, min(max_len, max(len(h) for h in histories)))
    x = np.zeros((len(histories), length), dtype=np.int64)
    g = np.full((len(histories), length), -1, dtype=np.int64)
    for row, (seq, ts) in enumerate(zip(histories, times, strict=True)):
        tail = seq[-length:]
        x[row, : len(tail)] = tail
        g[row, : len(tail)] = _gaps(ts)[-length:] if len(ts) else ts
    return torch.from_numpy(x), torch.from_numpy(g)


def keep_last_targets(batch: Batch, lengths: Sequence[int], keep: Sequence[int]) -> None:
    """Zeroes (in place) every target of row r but its last keep[r]; lengths[r] = targets in
    row r (the rows are left-aligned)."""
    for row, (n, k) in enumerate(zip(lengths, keep, strict=True)):
        batch.targets[row, : max(0, n - k)] = 0


class SessionTrainer:
    """Optimizer, schedule and loops around a :class:`SessionTransformer`."""

    def __init__(
        self, n_items: int, config: SessionTransformerConfig, device: torch.device | None = None
    ) -> None:
        self.config = config
        self.device = device or default_device()
        if config.threads:
            torch.set_num_threads(config.threads)
        torch.manual_seed(config.seed)
        self.model = SessionTransformer(n_items, config).to(self.device)
        self.optimizer = torch.optim.AdamW(
            _param_groups(self.model, config), lr=config.lr, weight_decay=config.weight_decay,
            fused=True,  # one kernel per parameter group: several times faster on CPU
        )
        self._rng = np.random.default_rng(config.seed)
        self._generator = torch.Generator().manual_seed(config.seed)

    def grow_items(self, n_items: int) -> None:
        """Admits new item rows, keeping existing rows and their AdamW moments."""
        before = self.model.n_items
        self.model.grow_items(n_items)
        if self.model.n_items > before:
            grow_optimizer_state(self.optimizer, self.model.item_embedding.weight)
            grow_optimizer_state(self.optimizer, self.model.item_bias)

    def reset_items(self, rows: Sequence[int]) -> None:
        """Recycled item rows: fresh weights and fresh AdamW moments, as a new row gets."""
        if not rows:
            return
        index = torch.as_tensor(list(rows), dtype=torch.long)
        self.model.reset_items(index)
        reset_optimizer_rows(self.optimizer, self.model.item_embedding.weight, index)
        reset_optimizer_rows(self.optimizer, self.model.item_bias, index)

    @torch.no_grad()
    def init_items_from(self, train: UserSequences) -> None:
        """Starts the item table from co-occurrence (see :mod:`models.item_init`)."""
        vectors = spectral_item_vectors(train, self.model.dim, self.config.seed)
        scale = self.model.item_embedding.weight[1:].norm(dim=1).mean()
        self.model.item_embedding.weight.copy_(vectors.to(self.device) * scale)

    def loss(self, batch: Batch) -> torch.Tensor:
        """Cross-entropy of the next item at every position (see :mod:`models.softmax_loss`)."""
        items = batch.items.to(self.device)
        with autocast_context(self.device):
            hidden = self.model(items, batch.gaps.to(self.device))
        targets = batch.targets.to(self.device)
        catalog = self.model.n_items
        mask = targets > 0
        picked, target = hidden[mask].float(), targets[mask]
        excluded = seen_pairs(items, mask, target) if self.config.mask_seen else None
        return self.catalog_loss(picked, target, excluded, catalog)

    def catalog_loss(
        self, hidden: torch.Tensor, targets: torch.Tensor, excluded: torch.Tensor | None,
        catalog: int,
    ) -> torch.Tensor:
        """The loss over items ``1..catalog`` of the picked positions' hidden states."""
        table, bias = self.item_rows(catalog)
        drop = self.config.item_dropout if self.model.training else 0.0
        if self.config.loss == "sampled":
            negatives = uniform_negatives(
                catalog, self.config.n_negatives, self._generator, hidden.device
            )
            rows = table_rows(table, bias)
            return sampled_cross_entropy(
                hidden, targets, negatives, dropped_rows(rows, drop) if drop else rows, catalog,
                excluded,
            )
        if drop:
            table = torch.nn.functional.dropout(table, drop)
        return catalog_cross_entropy(hidden, table, bias, targets, excluded)

    def item_rows(self, catalog: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows ``0..catalog`` of the item table and of the item bias, as the loss reads them.
        The whole table is returned as itself, not as a slice: a slice's backward allocates and
        copies a second table-sized gradient every step."""
        weight, bias = self.model.item_embedding.weight, self.model.item_bias
        if catalog + 1 == len(weight):
            return weight, bias
        return weight[: catalog + 1], bias[: catalog + 1]

    def _step(self, batch: Batch) -> float:
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(batch)
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.optimizer.step()
        return float(loss.detach())

    def partial_fit(
        self, items: list[IntArray], times: list[IntArray], fresh: Sequence[int] | None = None
    ) -> float:
        """One online step on a micro-batch of encoded sequences; returns the loss.

        `fresh[i]`: only the last fresh[i] events of sequence i are targets (the ones that just
        arrived); the earlier ones are context only. Without it every position is a target, so
        each event would be learned again with every later event of its user."""
        rows = [
            (s, t, fresh[i] if fresh is not None else len(s))
            for i, (s, t) in enumerate(zip(items, times, strict=True))
            if len(s) >= 2
        ]
        if not rows:
            return math.nan
        batch = make_batch([s for s, _, _ in rows], [t for _, t, _ in rows], self.config.max_len)
        if fresh is not None:
            keep_last_targets(batch, [min(len(s), self.config.max_len + 1) - 1 for s, _, _ in rows],
                              [k for _, _, k in rows])
        if not bool((batch.targets > 0).any()):
            return math.nan
        return self._step(batch)

    def fit(self, train: UserSequences, validation: Queries | None = None) -> FitReport:
        """Offline training with warm-up + cosine schedule and validation early stopping."""
        cfg = self.config
        if cfg.spectral_init:
            self.init_items_from(train)
        users = [u for u, s in enumerate(train.items) if len(s) >= 2]
        lengths = {u: min(len(train.items[u]) - 1, cfg.max_len) for u in users}
        steps_per_epoch = math.ceil(len(users) / cfg.batch_size)
        start, cpu_start = time.perf_counter(), time.process_time()
        schedule = _warmup_cosine(self.optimizer, cfg, cfg.epochs * steps_per_epoch)
        tracker = _BestTracker(cfg.patience)
        examples, epoch, out_of_time = 0, 0, False
        for epoch in range(1, cfg.epochs + 1):
            examples += self._epoch(train, lengths, schedule)
            elapsed = time.perf_counter() - start
            out_of_time = elapsed > cfg.time_budget_s
            if out_of_time:
                log.info("time budget reached epoch=%d elapsed_s=%.1f", epoch, elapsed)
            last = epoch == cfg.epochs or out_of_time
            if validation is not None and (epoch % cfg.eval_every == 0 or last):
                ndcg = self.evaluate(validation)["ndcg@10"]
                log.info("epoch=%d elapsed_s=%.1f val_ndcg10=%.4f", epoch, elapsed, ndcg)
                if tracker.update(epoch, elapsed, ndcg, self.model):
                    break
            if out_of_time:
                break
        if validation is not None and tracker.state is not None:
            self.model.load_state_dict(tracker.state)
        return FitReport(epoch, tracker.best_epoch, tracker.best, time.perf_counter() - start,
                         examples, tracker.history, epoch if out_of_time else None,
                         time.process_time() - cpu_start)

    def _epoch(
        self, train: UserSequences, lengths: dict[int, int],
        schedule: torch.optim.lr_scheduler.LambdaLR,
    ) -> int:
        """One pass over the training users; returns the number of predicted positions."""
        cfg = self.config
        examples = 0
        for chunk in _bucketed_batches(lengths, cfg.batch_size, self._rng):
            items, times = [train.items[u] for u in chunk], [train.times[u] for u in chunk]
            batch = make_batch(items, times, cfg.max_len, self._rng if cfg.random_crops else None)
            self._step(batch)
            schedule.step()
            examples += int((batch.targets > 0).sum())
        return examples

    @torch.no_grad()
    def encode_histories(self, histories: list[IntArray], times: list[IntArray]) -> torch.Tensor:
        """Query vectors ``[n, dim]`` for index-encoded histories (the scorer's ``encode``)."""
        self.model.eval()
        items, gaps = history_batch(histories, times, self.config.max_len)
        return self.model.encode(items.to(self.device), gaps.to(self.device)).float()

    @torch.no_grad()
    def score(self, queries: Queries, batch_size: int = 512) -> FloatArray:
        """Full-catalog scores ``[n_queries, n_items + 1]`` for evaluation."""
        rows = []
        for lo in range(0, len(queries.targets), batch_size):
            hi = lo + batch_size
            q = self.encode_histories(queries.histories[lo:hi], queries.history_times[lo:hi])
            rows.append(self.model.logits(q).float().cpu().numpy())
        return np.concatenate(rows).astype(np.float32)

    @torch.no_grad()
    def evaluate(self, queries: Queries, batch_size: int = 1024) -> dict[str, float]:
        """Metrics of the queries' targets ranked against the catalog, history items excluded;
        computed a batch of queries at a time (no full score matrix is held)."""
        ranks = []
        for lo in range(0, len(queries.targets), batch_size):
            hi = lo + batch_size
            q = self.encode_histories(queries.histories[lo:hi], queries.history_times[lo:hi])
            scores = self.model.logits(q).float()
            seen = [torch.from_numpy(h) for h in queries.histories[lo:hi]]
            rows = torch.repeat_interleave(torch.arange(len(seen)),
                                           torch.tensor([len(h) for h in seen]))
            scores[rows.to(scores.device), torch.cat(seen).to(scores.device)] = -torch.inf
            scores[:, 0] = -torch.inf
            targets = torch.from_numpy(queries.targets[lo:hi]).to(scores.device)
            picked = scores.gather(1, targets[:, None])
            rank = (scores >= picked).sum(dim=1).cpu().numpy().astype(np.int64)
            rank[~np.isfinite(picked[:, 0].cpu().numpy())] = NEVER
            ranks.append(rank)
        return metrics_from_ranks(np.concatenate(ranks))


class _BestTracker:
    """Keeps the best validation weights; says when patience ran out."""

    def __init__(self, patience: int) -> None:
        self.patience = patience
        self.best = -1.0
        self.best_epoch = 0
        self.state: dict[str, Any] | None = None
        self.stale = 0
        self.history: list[tuple[int, float, float]] = []

    def update(self, epoch: int, elapsed: float, ndcg: float, model: torch.nn.Module) -> bool:
        """Records a check; returns True when training should stop."""
        self.history.append((epoch, elapsed, ndcg))
        if ndcg > self.best:
            self.best, self.best_epoch, self.stale = ndcg, epoch, 0
            self.state = copy.deepcopy(model.state_dict())
            return False
        self.stale += 1
        return self.stale >= self.patience


def _param_groups(
    model: SessionTransformer, cfg: SessionTransformerConfig
) -> list[dict[str, Any]]:
    """The item table (and bias) may learn slower than the encoder: it overfits first."""
    items = [model.item_embedding.weight, model.item_bias]
    ids = {id(p) for p in items}
    rest = [p for p in model.parameters() if id(p) not in ids]
    return [
        {"params": rest, "lr": cfg.lr},
        {"params": items, "lr": cfg.lr * cfg.item_lr_multiplier},
    ]


def _bucketed_batches(
    lengths: dict[int, int], batch_size: int, rng: np.random.Generator
) -> list[list[int]]:
    """Batches of similar-length sequences, in random order.

    Padding to the longest row otherwise more than doubles the work on long-tailed ML data;
    a random jitter on the sort key keeps batch composition changing between epochs.
    """
    users = np.fromiter(lengths.keys(), dtype=np.int64)
    keys = np.fromiter(lengths.values(), dtype=np.float64) * rng.uniform(0.8, 1.25, len(users))
    ordered = users[np.argsort(keys)]
    chunks = [ordered[lo : lo + batch_size].tolist() for lo in range(0, len(ordered), batch_size)]
    return [chunks[i] for i in rng.permutation(len(chunks))]


def _warmup_cosine(
    optimizer: torch.optim.Optimizer, cfg: SessionTransformerConfig, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    warmup = max(1, int(cfg.warmup_frac * total_steps))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
        return cfg.min_lr_frac + (1 - cfg.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
