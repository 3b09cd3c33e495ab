"""Hybrid-parallel full retrain under torchrun: `python -m torch.distributed.run --nproc_per_node N
-m online_trainer.distributed --data FILE --config JSON --out DIR`.

The session Transformer's four embedding tables (item vectors, item biases, positions, gap
buckets) are model-parallel: models.embedding_plan places each on one process or splits it by
rows, and each process builds only its shards (models.sharded_embeddings exchanges ids and
vectors with all_to_all_single). The dense encoder is data-parallel under
DistributedDataParallel. Each process trains on an equal share of the users, batch_size / world
per step, so the global batch equals the single-process one; table gradients are averaged like
DDP averages the dense ones, and the gradient-norm clip sees the norm of the whole model.
Early stopping uses every process's share of the validation users, gathered, so every process
takes the same decision; the wall-clock budget is replaced by the epoch cap because clocks
differ between processes and a divergent stop would deadlock. Each process writes only its
shards; the launcher assembles the full model (`assemble`). Backend: gloo on CPU, NCCL on CUDA.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F  # noqa: N812 - torch convention
from safetensors.torch import load_file, save_file
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from models.accelerators import default_device
from models.embedding_plan import PlanError, TablePlan, TableSpec, bytes_per_rank, plan_tables
from models.embeddings import padded_width
from models.metrics import exclude, metrics_from_ranks, target_ranks
from models.sequence_training import Batch, FitReport, SessionTrainer, history_batch
from models.sequences import Queries, UserSequences
from models.session_config import SessionTransformerConfig
from models.session_transformer import N_GAP_BUCKETS, CausalBlock, Dropout, gap_buckets
from models.sharded_embeddings import ShardedTable, embedding_std, sharded_logits
from models.softmax_loss import sampled_cross_entropy, uniform_negatives
from online_trainer.online_model import Interaction
from online_trainer.retrain import split_recent
from online_trainer.vocabulary import IdVocabulary, VocabularyLimits

logger = logging.getLogger(__name__)

# Table name -> the SessionTransformer parameter it becomes when the shards are assembled.
TABLES = {
    "items": "item_embedding.weight",
    "item_bias": "item_bias",
    "positions": "position_embedding.weight",
    "gaps": "gap_embedding.weight",
}
ITEM_TABLES = ("items", "item_bias")
SCORE_CHUNK = 512


def session_tables(n_items: int, config: SessionTransformerConfig) -> list[TableSpec]:
    dim = padded_width(config.dim)
    return [
        TableSpec("items", n_items + 1, dim),
        TableSpec("item_bias", n_items + 1, 1),
        TableSpec("positions", config.max_len, dim),
        TableSpec("gaps", N_GAP_BUCKETS, dim),
    ]


def session_plan(
    n_items: int, config: SessionTransformerConfig, world: int, budget_bytes: int | None = None
) -> dict[str, TablePlan]:
    return plan_tables(
        session_tables(n_items, config), world, budget_bytes, followers={"item_bias": "items"}
    )


class DenseEncoder(nn.Module):
    """The replicated part of the session Transformer (same parameter names)."""

    def __init__(self, dim: int, config: SessionTransformerConfig) -> None:
        super().__init__()
        self.input_dropout = Dropout(config.dropout)
        self.input_norm = nn.LayerNorm(dim)
        self.blocks = nn.ModuleList(
            CausalBlock(dim, config.heads, config.ffn_multiplier, config.dropout)
            for _ in range(config.layers)
        )
        self.output_norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.input_dropout(self.input_norm(x))
        for block in self.blocks:
            x = block(x)
        out: torch.Tensor = self.output_norm(x)
        return out


class ShardedSessionModel(nn.Module):
    """SessionTransformer's forward and logits with sharded tables and a DDP dense encoder."""

    def __init__(
        self, n_items: int, config: SessionTransformerConfig, plans: dict[str, TablePlan],
        group: Any, device: torch.device,
    ) -> None:
        super().__init__()
        rank = dist.get_rank()
        self.dim = padded_width(config.dim)
        self.n_items = n_items
        std = embedding_std(self.dim)

        def table(name: str, scale: float, seed: int, padding: bool = False) -> ShardedTable:
            return ShardedTable(
                plans[name], rank, group, scale, config.seed * 1009 + seed, padding, device
            )

        self.items = table("items", std, 1, padding=True)
        self.item_bias = table("item_bias", 0.0, 2)
        self.positions = table("positions", std, 3)
        self.gaps = table("gaps", std, 4)
        torch.manual_seed(config.seed)
        dense = DenseEncoder(self.dim, config).to(device)
        self.dense = DistributedDataParallel(dense) if device.type == "cpu" else (
            DistributedDataParallel(dense, device_ids=[device])
        )

    def tables(self) -> dict[str, ShardedTable]:
        return {"items": self.items, "item_bias": self.item_bias,
                "positions": self.positions, "gaps": self.gaps}

    def forward(self, items: torch.Tensor, gaps_s: torch.Tensor) -> torch.Tensor:
        length = items.shape[1]
        positions = torch.arange(length, device=items.device)
        x = self.items.lookup(items) * math.sqrt(self.dim)
        x = x + self.positions.lookup(positions)[None] + self.gaps.lookup(gap_buckets(gaps_s))
        out: torch.Tensor = self.dense(x)
        return out

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return sharded_logits(hidden, self.items, self.item_bias)


class ShardedSessionTrainer(SessionTrainer):
    """SessionTrainer's loss, schedule and early stopping over a ShardedSessionModel."""

    def __init__(
        self, n_items: int, config: SessionTransformerConfig, plans: dict[str, TablePlan],
        device: torch.device | None = None,
    ) -> None:
        # SessionTrainer.__init__ would build every table whole on this process: not called.
        self.config = config
        self.device = device or default_device()
        if config.threads:
            torch.set_num_threads(config.threads)
        self.plans = plans
        self.group = dist.new_group(backend="nccl" if self.device.type == "cuda" else "gloo")
        self.sharded = ShardedSessionModel(n_items, config, plans, self.group, self.device)
        # SessionTrainer's loss and fit call model(items, gaps) and model.logits(hidden).
        self.model = self.sharded  # type: ignore[assignment]
        item_params = [self.sharded.items.weight, self.sharded.item_bias.weight]
        ids = {id(p) for p in item_params}
        rest = [p for p in self.sharded.parameters() if id(p) not in ids]
        self.optimizer = torch.optim.AdamW(
            [{"params": rest, "lr": config.lr},
             {"params": item_params, "lr": config.lr * config.item_lr_multiplier}],
            lr=config.lr, weight_decay=config.weight_decay,
        )
        self._rng = np.random.default_rng(config.seed)
        self._generator = torch.Generator().manual_seed(config.seed)

    @torch.no_grad()
    def init_items_from(self, train: UserSequences) -> None:
        """The spectral start on the processes that hold item rows, for their rows only."""
        table = self.sharded.items
        own = table.weight[1:] if table.lo == 0 else table.weight
        # The scale is the mean row norm of the whole table (as on one process), not the shard's.
        count = torch.tensor(float(len(own)), device=own.device)
        norms = torch.stack([own.norm(dim=1).sum(), count])
        dist.all_reduce(norms)
        if table.hi == table.lo:
            return
        from models.item_init import spectral_item_vectors

        vectors = spectral_item_vectors(train, self.sharded.dim, self.config.seed)
        scale = norms[0] / norms[1]
        table.weight.copy_(vectors[table.lo : table.hi].to(self.device) * scale)

    def fit(self, train: UserSequences, validation: Queries | None = None) -> FitReport:
        if self.config.spectral_init:
            self.init_items_from(train)
            self.config = self.config.model_copy(update={"spectral_init": False})
        return super().fit(shard(train, dist.get_rank(), dist.get_world_size()), validation)

    def catalog_loss(
        self, hidden: torch.Tensor, targets: torch.Tensor, excluded: torch.Tensor | None,
        catalog: int,
    ) -> torch.Tensor:
        """SessionTrainer's loss over sharded item rows: the sampled softmax looks its rows up
        (every process draws the same negatives), the full softmax gathers its logits from the
        processes holding the rows."""
        if self.config.loss == "sampled":
            negatives = uniform_negatives(
                catalog, self.config.n_negatives, self._generator, hidden.device
            )

            def rows(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                return self.sharded.items.lookup(ids), self.sharded.item_bias.lookup(ids)[:, 0]

            return sampled_cross_entropy(hidden, targets, negatives, rows, catalog, excluded)
        logits = self.sharded.logits(hidden).float()
        logits[:, 0] = -torch.inf
        logits[:, catalog + 1 :] = -torch.inf
        if excluded is not None:
            logits = logits.index_put((excluded[0], excluded[1]), torch.tensor(-torch.inf))
        return F.cross_entropy(logits, targets)

    def _step(self, batch: Batch) -> float:
        self.sharded.train()
        self.optimizer.zero_grad(set_to_none=False)
        loss = self.loss(batch)
        loss.backward()  # type: ignore[no-untyped-call]
        self._finish_gradients()
        self.optimizer.step()
        return float(loss.detach())

    def _finish_gradients(self) -> None:
        """Averages table gradients over processes (as DDP does for the dense ones) and clips
        by the norm of the whole model: dense gradients are identical everywhere, table rows
        are disjoint, so the squared norm is the dense part plus the sum of every shard's."""
        world = dist.get_world_size()
        tables = [t.weight for t in self.sharded.tables().values()]
        for param in tables:
            if param.grad is None:
                param.grad = torch.zeros_like(param)
            param.grad /= world
        dense = [p.grad for p in self.sharded.dense.parameters() if p.grad is not None]
        table_sq = sum((g.grad.float().pow(2).sum() for g in tables if g.grad is not None),
                       torch.zeros((), device=self.device))
        dist.all_reduce(table_sq)
        dense_sq = sum((g.float().pow(2).sum() for g in dense), torch.zeros((), device=self.device))
        norm = float((table_sq + dense_sq).sqrt())
        coef = min(1.0, self.config.grad_clip / (norm + 1e-6))
        if coef < 1.0:
            for param in self.sharded.parameters():
                if param.grad is not None:
                    param.grad.mul_(coef)

    @torch.no_grad()
    def evaluate(self, queries: Queries, batch_size: int = SCORE_CHUNK) -> dict[str, float]:
        """Metrics over all queries: each process ranks its share, the ranks are gathered."""
        world, rank = dist.get_world_size(), dist.get_rank()
        parts = np.array_split(np.arange(len(queries.targets)), world)
        chunks = max(1, math.ceil(max(len(p) for p in parts) / batch_size))
        mine: list[np.ndarray[Any, Any]] = []
        for piece in np.array_split(parts[rank], chunks):
            index = piece.tolist()
            histories = [queries.histories[i] for i in index]
            times = [queries.history_times[i] for i in index]
            # A process with nothing to rank still takes part in the exchanges: one padding row.
            scores = self._scores(histories or [np.zeros(1, np.int64)],
                                  times or [np.zeros(1, np.int64)])
            if index:
                mine.append(target_ranks(exclude(scores, histories), queries.targets[index]))
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, np.concatenate(mine) if mine else np.zeros(0, np.int64))
        return metrics_from_ranks(np.concatenate(gathered))

    def _scores(self, histories: list[Any], times: list[Any]) -> Any:
        self.sharded.eval()
        items, gaps = history_batch(histories, times, self.config.max_len)
        items, gaps = items.to(self.device), gaps.to(self.device)
        hidden = self.sharded(items, gaps)
        last = (items > 0).sum(dim=1).clamp(min=1) - 1
        query = hidden[torch.arange(len(items), device=self.device), last]
        return self.sharded.logits(query).float().cpu().numpy()

    def local_tensors(self) -> dict[str, torch.Tensor]:
        """This process's shards (and, on rank 0, the dense weights) for `assemble`."""
        out = {f"table.{n}": t.weight.detach().cpu() for n, t in self.sharded.tables().items()}
        if dist.get_rank() == 0:
            for name, tensor in self.sharded.dense.module.state_dict().items():
                out[f"dense.{name}"] = tensor.detach().cpu()
        return {k: v.contiguous() for k, v in out.items()}

    def embedding_bytes(self) -> int:
        tables = self.sharded.tables().values()
        return sum(t.weight.numel() * t.weight.element_size() for t in tables)


def shard(train: UserSequences, rank: int, world: int) -> UserSequences:
    """Equal-sized shards of trainable users, so every rank takes the same number of steps."""
    users = [u for u, s in enumerate(train.items) if len(s) >= 2]
    per_rank = len(users) // world
    mine = users[rank * per_rank : (rank + 1) * per_rank]
    return UserSequences(
        [train.items[u] for u in mine], [train.times[u] for u in mine], train.n_items
    )


def assemble(out: Path) -> dict[str, torch.Tensor]:
    """The SessionTransformer state dict from every process's shard file."""
    plan = json.loads((out / "plan.json").read_text())
    parts = {int(p.stem.split("-")[1]): load_file(str(p)) for p in out.glob("shard-*.safetensors")}
    tensors = {k[len("dense."):]: v for k, v in parts[0].items() if k.startswith("dense.")}
    for name, target in TABLES.items():
        rows = [parts[s["rank"]][f"table.{name}"] for s in plan[name]["shards"]]
        whole = torch.cat(rows)
        tensors[target] = whole.squeeze(1) if name == "item_bias" else whole
    return tensors


def write_dataset(path: Path, interactions: list[Interaction], items: IdVocabulary) -> None:
    path.write_text(
        json.dumps(
            {
                "items": items.mapping(),
                "item_sightings": items.sightings(),
                "item_limits": [items.limits.min_count, items.limits.max_rows],
                "events": [[e.user, e.item, e.timestamp] for e in interactions],
            }
        )
    )


@dataclass(frozen=True)
class Prepared:
    train: UserSequences
    validation: Queries | None
    items: dict[str, int]


def prepare(args: argparse.Namespace) -> Prepared:
    """The training sequences: a retrain window's split, or synthetic ones (capacity bench)."""
    if args.synthetic_items:
        rng = np.random.default_rng(0)
        n_users, length = args.synthetic_users, 20
        items = [rng.integers(1, args.synthetic_items + 1, length) for _ in range(n_users)]
        times = [np.arange(length, dtype=np.int64) * 60 for _ in range(n_users)]
        return Prepared(UserSequences(items, times, args.synthetic_items), None, {})
    raw = json.loads(args.data.read_text())
    interactions = [Interaction(u, i, int(t)) for u, i, t in raw["events"]]
    min_count, max_rows = raw["item_limits"]
    vocabulary = IdVocabulary(raw["items"], VocabularyLimits(min_count, max_rows),
                              raw["item_sightings"])
    train, validation, _ = split_recent(interactions, vocabulary)
    return Prepared(train, validation if len(validation.targets) else None, vocabulary.mapping())


def train_sharded(args: argparse.Namespace) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    config = SessionTransformerConfig.model_validate_json(args.config)
    config = config.model_copy(
        update={"batch_size": max(1, config.batch_size // world), "time_budget_s": 1e9}
    )
    data = prepare(args)
    plans = session_plan(data.train.n_items, config, world, args.budget_bytes)
    trainer = ShardedSessionTrainer(data.train.n_items, config, plans)
    report = trainer.fit(data.train, data.validation)
    validation = trainer.evaluate(data.validation) if data.validation else {}
    examples = torch.tensor(float(report.examples), device=trainer.device)
    dist.all_reduce(examples)
    memory: list[Any] = [None] * world
    dist.all_gather_object(memory, {
        "embedding_bytes": trainer.embedding_bytes(),
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    })
    args.out.mkdir(parents=True, exist_ok=True)
    save_file(trainer.local_tensors(), str(args.out / f"shard-{rank}.safetensors"))
    if rank == 0:
        (args.out / "plan.json").write_text(
            json.dumps({n: p.describe() for n, p in plans.items()})
        )
        (args.out / "result.json").write_text(json.dumps({
            "items": data.items, "validation": validation, "epochs": report.epochs,
            "world_size": world, "train_s": report.train_s, "examples": int(examples),
            "examples_per_s": float(examples) / max(report.train_s, 1e-9),
            "by_rank": memory, "plan_bytes_per_rank": bytes_per_rank(plans, world),
        }))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, help="Retrain window (write_dataset's JSON).")
    parser.add_argument("--synthetic-items", type=int, default=0,
                        help="Instead of --data: random sequences over this many items.")
    parser.add_argument("--synthetic-users", type=int, default=256)
    parser.add_argument("--config", type=str, required=True, help="SessionTransformerConfig JSON")
    parser.add_argument("--budget-bytes", type=int, default=None,
                        help="Per-process embedding training memory; the plan must fit it.")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    try:
        train_sharded(args)
    except PlanError as error:
        # Every process plans alike, so every process refuses alike: no collective is pending.
        logger.error("plan refused rank=%d reason=%s", dist.get_rank(), error)
        if dist.get_rank() == 0:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "refused.json").write_text(json.dumps({"error": str(error)}))
        dist.destroy_process_group()
        raise SystemExit(3) from error
    rank, world = dist.get_rank(), dist.get_world_size()
    dist.barrier()
    dist.destroy_process_group()
    logger.info("rank=%d/%d done", rank, world)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    np.seterr(all="ignore")
    main()
