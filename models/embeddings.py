"""Growing, collision-free, fused embedding table with hot/cold tiering and sparse Adagrad.

One table holds every categorical feature of the same width (``FusedEmbedding(features=...)``):
each ``(feature, raw id)`` pair gets its own row from an explicit id -> row map, so there are no
hash collisions. Rows are:

- **admitted on first sight**, or after ``min_count`` sightings (until then the id shares its
  feature's reserved "unknown" row, which is never evicted);
- **evicted by TTL**: rows unseen for ``ttl_s`` are unmapped and their slot is reused (with
  fresh weights and fresh optimizer state);
- **padded** to a multiple of 16 bytes (``padded_width``);
- **tiered**: at most ``hot_capacity`` rows live on the accelerator, the rest in host memory;
  ``rebalance()`` promotes the most-accessed cold rows (decayed access counts) and demotes the
  coldest hot ones. With ``hot_capacity=None`` every row lives on the device.

Training is sparse: ``gather(rows)`` returns a leaf tensor that requires grad, and
``apply_gradients(rows, grad)`` runs row-wise sparse Adagrad on just those rows (duplicates
summed). The Adagrad accumulator is stored beside each row, in the same tier, so growth,
promotion and eviction always keep weights and optimizer state together.

Typical use by the online trainer::

    rows = table.lookup("item", raw_item_ids, now=event_time)
    vectors = table.gather(rows)
    loss(vectors, ...).backward()
    table.apply_gradients(rows, vectors.grad)

:func:`grow_optimizer_state` extends a dense optimizer's per-row state (Adam moments) after a
``nn.Embedding`` was grown in place (used by the session Transformer's item table).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger(__name__)

ROW_ALIGN_BYTES = 16
UNASSIGNED = -1


def padded_width(dim: int, itemsize: int = 4) -> int:
    """Smallest width >= dim whose rows are a multiple of 16 bytes."""
    per_row = max(1, ROW_ALIGN_BYTES // itemsize)
    return -(-dim // per_row) * per_row


def grow_optimizer_state(optimizer: torch.optim.Optimizer, param: torch.Tensor) -> None:
    """Zero-pads each per-element state tensor of ``param`` to the parameter's new length.

    Existing rows keep their moments; new rows start from zero, exactly like a fresh optimizer.
    """
    state = optimizer.state.get(param)
    if not state:
        return
    for key, value in list(state.items()):
        if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape != param.shape:
            pad = param.shape[0] - value.shape[0]
            state[key] = torch.cat([value, value.new_zeros((pad, *value.shape[1:]))])


def reset_optimizer_rows(
    optimizer: torch.optim.Optimizer, param: torch.Tensor, rows: torch.Tensor
) -> None:
    """Zeroes each per-element state tensor of ``param`` at ``rows`` (first dimension): a row
    handed to another id starts from the state a fresh row has."""
    state = optimizer.state.get(param)
    if not state:
        return
    for value in state.values():
        if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape == param.shape:
            value[rows.to(value.device)] = 0


class EmbeddingConfig(BaseModel):
    """Admission, eviction, tiering and optimizer settings of a :class:`FusedEmbedding`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dim: int = Field(64, ge=1, description="Requested width; padded to 16-byte rows.")
    min_count: int = Field(1, ge=1, description="Sightings before an id gets its own row.")
    ttl_s: float | None = Field(None, gt=0, description="Evict rows unseen this long.")
    initial_rows: int = Field(1024, ge=1, description="Initial row capacity (grows x2).")
    hot_capacity: int | None = Field(None, ge=1, description="Max rows on the device.")
    lr: float = Field(0.05, gt=0, description="Sparse Adagrad learning rate.")
    initial_accumulator: float = Field(0.1, ge=0, description="Adagrad accumulator start.")
    init_std: float = Field(0.05, gt=0, description="Normal init std of new rows.")
    access_decay: float = Field(0.9, gt=0, le=1, description="Hotness decay per rebalance.")
    seed: int = Field(0, description="Seed of row initialisation.")


class _Tier:
    """Rows plus their Adagrad accumulator on one device, with slot ownership.

    ``capacity=None`` lets the tier grow by doubling; a bounded tier refuses new rows instead.
    """

    def __init__(
        self, rows: int, width: int, device: torch.device, init: float, capacity: int | None
    ) -> None:
        self.init = init
        self.capacity = capacity
        self.weights = torch.zeros(rows, width, device=device)
        self.accumulator = torch.full((rows,), init, device=device)
        self.owner = torch.full((rows,), UNASSIGNED, dtype=torch.int64)
        self.free = list(range(rows - 1, -1, -1))

    def __len__(self) -> int:
        return int(self.weights.shape[0])

    def allocate(self, row: int) -> int | None:
        if not self.free:
            if self.capacity is not None and len(self) >= self.capacity:
                return None
            target = max(1, 2 * len(self))
            if self.capacity is not None:
                target = min(target, self.capacity)
            self._grow(target)
        slot = self.free.pop()
        self.owner[slot] = row
        return slot

    def release(self, slot: int) -> None:
        self.owner[slot] = UNASSIGNED
        self.free.append(slot)

    def _grow(self, rows: int) -> None:
        old = len(self)
        extra = rows - old
        width = self.weights.shape[1]
        self.weights = torch.cat([self.weights, self.weights.new_zeros(extra, width)])
        extra_acc = self.accumulator.new_full((extra,), self.init)
        self.accumulator = torch.cat([self.accumulator, extra_acc])
        self.owner = torch.cat([self.owner, torch.full((extra,), UNASSIGNED, dtype=torch.int64)])
        self.free.extend(range(rows - 1, old - 1, -1))


class FusedEmbedding:
    """See the module docstring. Row indices are logical and stable while a row is mapped."""

    def __init__(
        self, features: Sequence[str], config: EmbeddingConfig, device: torch.device | None = None
    ) -> None:
        self.config = config
        self.features = tuple(features)
        self.width = padded_width(config.dim)
        self.device = device or torch.device("cpu")
        self._gen = torch.Generator().manual_seed(config.seed)
        self.ids: dict[tuple[str, str], int] = {}
        self._pending: dict[tuple[str, str], int] = {}
        self._free: list[int] = []
        self._n_rows = 0
        capacity = config.initial_rows + len(self.features)
        if config.hot_capacity is not None:
            capacity = min(capacity, config.hot_capacity)
        init = config.initial_accumulator
        self._hot = _Tier(capacity, self.width, self.device, init, config.hot_capacity)
        self._cold = _Tier(0, self.width, torch.device("cpu"), init, None)
        # Logical row -> (tier, slot); tier 0 = hot, 1 = cold.
        self._tier = torch.zeros(0, dtype=torch.int64)
        self._slot = torch.zeros(0, dtype=torch.int64)
        self.last_seen = torch.zeros(0, dtype=torch.float64)
        self.hits = torch.zeros(0, dtype=torch.float64)
        self.dirty = torch.zeros(0, dtype=torch.bool)
        self.unknown_rows = {f: self._new_row() for f in self.features}

    @property
    def n_rows(self) -> int:
        """Logical rows ever allocated (mapped, unknown or free)."""
        return self._n_rows

    def _new_row(self) -> int:
        if self._free:
            row = self._free.pop()
        else:
            row = self._n_rows
            self._n_rows += 1
            self._extend_metadata(self._n_rows)
            self._place(row)
        self._reset_row(row)
        return row

    def _extend_metadata(self, n: int) -> None:
        extra = n - len(self._tier)
        if extra <= 0:
            return
        grow = max(extra, len(self._tier))  # amortised doubling
        self._tier = torch.cat([self._tier, torch.zeros(grow, dtype=torch.int64)])
        self._slot = torch.cat([self._slot, torch.full((grow,), UNASSIGNED, dtype=torch.int64)])
        self.last_seen = torch.cat([self.last_seen, torch.zeros(grow, dtype=torch.float64)])
        self.hits = torch.cat([self.hits, torch.zeros(grow, dtype=torch.float64)])
        self.dirty = torch.cat([self.dirty, torch.zeros(grow, dtype=torch.bool)])

    def _place(self, row: int) -> None:
        slot = self._hot.allocate(row)
        if slot is not None:
            self._tier[row], self._slot[row] = 0, slot
            return
        cold_slot = self._cold.allocate(row)
        if cold_slot is None:  # unbounded tier: cannot happen, kept for the type checker
            raise RuntimeError("host tier refused a row")
        self._tier[row], self._slot[row] = 1, cold_slot

    def _reset_row(self, row: int) -> None:
        tier = self._hot if int(self._tier[row]) == 0 else self._cold
        slot = int(self._slot[row])
        fresh = torch.randn(self.config.dim, generator=self._gen) * self.config.init_std
        tier.weights[slot].zero_()
        tier.weights[slot, : self.config.dim] = fresh.to(tier.weights.device)
        tier.accumulator[slot] = self.config.initial_accumulator
        self.hits[row] = 0.0
        self.dirty[row] = True

    def lookup(self, feature: str, raw_ids: Sequence[str], now: float) -> torch.Tensor:
        """Rows for raw ids of one feature, admitting ids that reached ``min_count``."""
        if feature not in self.unknown_rows:
            raise KeyError(f"unknown feature {feature!r}; table has {self.features}")
        rows = [self._row_for(feature, str(raw)) for raw in raw_ids]
        index = torch.tensor(rows, dtype=torch.int64)
        self.last_seen[index] = now
        self.hits.index_add_(0, index, torch.ones(len(rows), dtype=torch.float64))
        return index

    def _row_for(self, feature: str, raw: str) -> int:
        key = (feature, raw)
        row = self.ids.get(key)
        if row is not None:
            return row
        seen = self._pending.get(key, 0) + 1
        if seen < self.config.min_count:
            self._pending[key] = seen
            return self.unknown_rows[feature]
        self._pending.pop(key, None)
        row = self._new_row()
        self.ids[key] = row
        return row

    def gather(self, rows: torch.Tensor) -> torch.Tensor:
        """``[len(rows), width]`` leaf tensor on the device that requires grad."""
        out = torch.empty(len(rows), self.width, device=self.device)
        tiers, slots = self._tier[rows], self._slot[rows]
        hot = tiers == 0
        out[hot.to(self.device)] = self._hot.weights[slots[hot].to(self.device)]
        if bool((~hot).any()):
            cold = self._cold.weights[slots[~hot]]
            out[(~hot).to(self.device)] = cold.to(self.device, non_blocking=True)
        return out.requires_grad_(True)

    @torch.no_grad()
    def apply_gradients(self, rows: torch.Tensor, grad: torch.Tensor) -> None:
        """Row-wise sparse Adagrad on the touched rows (duplicate rows' gradients summed)."""
        unique, inverse = torch.unique(rows, return_inverse=True)
        summed = torch.zeros(len(unique), self.width, device=grad.device, dtype=grad.dtype)
        summed.index_add_(0, inverse.to(grad.device), grad)
        summed[:, self.config.dim :] = 0.0  # alignment padding stays zero
        for tier_id, tier in ((0, self._hot), (1, self._cold)):
            mask = self._tier[unique] == tier_id
            if not bool(mask.any()):
                continue
            slots = self._slot[unique[mask]].to(tier.weights.device)
            g = summed[mask.to(grad.device)].to(tier.weights.device)
            acc = tier.accumulator[slots] + g.pow(2).mean(dim=1)
            tier.accumulator[slots] = acc
            tier.weights[slots] -= self.config.lr * g / acc.sqrt().clamp_min(1e-10)[:, None]
        self.dirty[unique] = True

    def evict_expired(self, now: float) -> int:
        """Unmaps rows unseen for ``ttl_s`` and recycles their slots; returns how many."""
        if self.config.ttl_s is None:
            return 0
        keep = set(self.unknown_rows.values())
        expired = [
            key for key, row in self.ids.items()
            if row not in keep and now - float(self.last_seen[row]) > self.config.ttl_s
        ]
        for key in expired:
            self._free.append(self.ids.pop(key))
        # Sub-threshold sighting counts are dropped too, so "min_count sightings" means within
        # one TTL period and the pending map stays bounded.
        self._pending.clear()
        if expired:
            log.info("evicted rows=%d ttl_s=%s", len(expired), self.config.ttl_s)
        return len(expired)

    @torch.no_grad()
    def rebalance(self) -> int:
        """Swaps the most-accessed cold rows with the least-accessed hot rows.

        Access counts decay by ``access_decay`` each call so hotness follows recent traffic.
        Returns the number of rows promoted.
        """
        n = self._n_rows
        cold_rows = torch.nonzero(self._tier[:n] == 1).flatten()
        hot_rows = torch.nonzero(self._tier[:n] == 0).flatten()
        promoted = 0
        if len(cold_rows) and len(hot_rows):
            cold_order = cold_rows[torch.argsort(self.hits[cold_rows], descending=True)]
            hot_order = hot_rows[torch.argsort(self.hits[hot_rows])]
            for up, down in zip(cold_order.tolist(), hot_order.tolist(), strict=False):
                if self.hits[up] <= self.hits[down]:
                    break
                self._swap(up, down)
                promoted += 1
        self.hits[:n] *= self.config.access_decay
        if promoted:
            log.info("rebalanced promoted=%d hot_capacity=%s", promoted, self.config.hot_capacity)
        return promoted

    def _swap(self, cold_row: int, hot_row: int) -> None:
        cold_slot, hot_slot = int(self._slot[cold_row]), int(self._slot[hot_row])
        hot_w = self._hot.weights[hot_slot].clone()
        hot_a = self._hot.accumulator[hot_slot].clone()
        self._hot.weights[hot_slot] = self._cold.weights[cold_slot].to(self.device)
        self._hot.accumulator[hot_slot] = self._cold.accumulator[cold_slot].to(self.device)
        self._cold.weights[cold_slot] = hot_w.cpu()
        self._cold.accumulator[cold_slot] = hot_a.cpu()
        self._hot.owner[hot_slot], self._cold.owner[cold_slot] = cold_row, hot_row
        self._tier[cold_row], self._slot[cold_row] = 0, hot_slot
        self._tier[hot_row], self._slot[hot_row] = 1, cold_slot

    def is_hot(self, rows: torch.Tensor) -> torch.Tensor:
        """Whether each logical row currently lives on the device tier."""
        return self._tier[rows] == 0

    @torch.no_grad()
    def rows(self, rows: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Weights ``[n, width]`` and accumulators ``[n]`` on CPU, in logical row order."""
        index = torch.arange(self._n_rows) if rows is None else rows
        weights = torch.empty(len(index), self.width)
        acc = torch.empty(len(index))
        for tier_id, tier in ((0, self._hot), (1, self._cold)):
            mask = self._tier[index] == tier_id
            slots = self._slot[index[mask]].to(tier.weights.device)
            weights[mask] = tier.weights[slots].cpu()
            acc[mask] = tier.accumulator[slots].cpu()
        return weights, acc

    @torch.no_grad()
    def write_rows(self, rows: torch.Tensor, weights: torch.Tensor, acc: torch.Tensor) -> None:
        """Overwrites logical rows (allocating any not yet present), e.g. from a checkpoint."""
        top = int(rows.max()) + 1 if len(rows) else 0
        while self._n_rows < top:
            self._n_rows += 1
            self._extend_metadata(self._n_rows)
            self._place(self._n_rows - 1)
        for tier_id, tier in ((0, self._hot), (1, self._cold)):
            mask = self._tier[rows] == tier_id
            slots = self._slot[rows[mask]].to(tier.weights.device)
            tier.weights[slots] = weights[mask].to(tier.weights.device)
            tier.accumulator[slots] = acc[mask].to(tier.weights.device)

    def mapped_ids(self) -> dict[str, dict[str, int]]:
        """``{feature: {raw_id: row}}`` for the model manifest."""
        out: dict[str, dict[str, int]] = {f: {} for f in self.features}
        for (feature, raw), row in self.ids.items():
            out[feature][raw] = row
        return out

    def take_dirty(self) -> torch.Tensor:
        """Rows changed since the last call (for delta checkpoints); clears the marks."""
        changed = torch.nonzero(self.dirty[: self._n_rows]).flatten()
        self.dirty[:] = False
        return changed
