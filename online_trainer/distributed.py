"""Hybrid-parallel full retrain under torchrun: `python -m torch.distributed.run --nproc_per_node N
-m online_trainer.distributed --data FILE --config JSON --out DIR`.

The session Transformer's embedding tables (item vectors, item biases, positions, gap buckets)
are model-parallel under TorchRec: its planner places each table whole, by rows or by columns
within the per-process budget (models.sharding_plan), DistributedModelParallel builds only each
process's shards (models.sharded_session), and its fused kernels train them inside the backward
pass. The dense encoder is data-parallel (DMP wraps it in DDP) and trained by AdamW. Each
process trains on an equal share of the users, batch_size / world per step, so the global batch
equals the single-process one; TorchRec averages table gradients over the processes as DDP
averages the dense ones. Early stopping uses every process's share of the validation users,
gathered, so every process takes the same decision; the wall-clock budget is replaced by the
epoch cap because clocks differ between processes and a divergent stop would deadlock. Each
process writes only its shards; the launcher assembles the full model (`assemble`). Backend:
gloo on CPU, NCCL on CUDA.
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
from safetensors.torch import load_file, save_file
from torchrec.optim.keyed import CombinedOptimizer, KeyedOptimizerWrapper

from models.accelerators import default_device
from models.metrics import exclude, metrics_from_ranks, target_ranks
from models.sequence_training import Batch, FitReport, SessionTrainer, history_batch
from models.sequences import Queries, UserSequences
from models.session_config import SessionTransformerConfig
from models.sharded_session import (
    SessionModule,
    Shard,
    ShardedSessionModel,
    TableOptimizer,
    apply_table_optimizer,
    table_shapes,
)
from models.sharded_session import assemble as assemble_parts
from models.sharding_plan import PlanError, SessionPlan, plan_tables
from online_trainer.online_model import Interaction
from online_trainer.retrain import split_recent
from online_trainer.vocabulary import IdVocabulary, VocabularyLimits

logger = logging.getLogger(__name__)

SCORE_CHUNK = 512
# Row-wise Adagrad's step shrinks with the square root of the squared gradients it has summed,
# where Adam's stays near its rate: its rates are the config's AdamW rates times this factor,
# chosen on the retrain window's validation users.
ADAGRAD_LR_FACTOR = 10.0


def table_optimizer(config: SessionTransformerConfig) -> TableOptimizer:
    lr = config.lr * ADAGRAD_LR_FACTOR
    return TableOptimizer("rowwise_adagrad", lr * config.item_lr_multiplier, lr,
                          config.weight_decay)


class ShardedSessionTrainer(SessionTrainer):
    """SessionTrainer's loss, schedule and early stopping over a ShardedSessionModel."""

    def __init__(
        self, n_items: int, config: SessionTransformerConfig, budget_bytes: int | None = None,
        device: torch.device | None = None,
    ) -> None:
        # SessionTrainer.__init__ would build every table whole on this process: not called.
        refuse_unsupported(config)
        self.config = config
        self.device = device or default_device()
        if config.threads:
            torch.set_num_threads(config.threads)
        module = SessionModule(n_items, config)
        apply_table_optimizer(module, table_optimizer(config))
        self.plan: SessionPlan = plan_tables(
            module, dist.get_world_size(), self.device, config.batch_size, budget_bytes
        )
        self.sharded = ShardedSessionModel(module, self.plan.plan, self.device, config.seed)
        # SessionTrainer's loss and fit call model(items, gaps) and model.logits(hidden).
        self.model = self.sharded  # type: ignore[assignment]
        dense = KeyedOptimizerWrapper(
            self.sharded.dense_parameters(),
            lambda params: torch.optim.AdamW(
                params, lr=config.lr, weight_decay=config.weight_decay
            ),
        )
        # One optimizer for the schedule: the dense AdamW and the tables' fused one (whose rate
        # the kernels read at every zero_grad and step).
        self.optimizer = CombinedOptimizer([("tables", self.sharded.fused_optimizer),
                                            ("dense", dense)])
        self._rng = np.random.default_rng(config.seed)

    @torch.no_grad()
    def init_items_from(self, train: UserSequences) -> None:
        """The spectral start, each process writing its shards of the item table."""
        from models.item_init import spectral_item_vectors

        shards = [s for s in self.sharded.shards() if s.table == "item"]
        # The scale is the mean row norm of the whole table (as on one process), not a shard's.
        scale = _mean_row_norm(shards, self.sharded.n_items)
        if not shards:
            return
        vectors = spectral_item_vectors(train, self.sharded.dim, self.config.seed)
        for shard in shards:
            rows, columns = shard.tensor.shape
            block = vectors[shard.row : shard.row + rows, shard.column : shard.column + columns]
            shard.tensor.copy_(block.to(shard.tensor.device) * scale)

    def fit(self, train: UserSequences, validation: Queries | None = None) -> FitReport:
        if self.config.spectral_init:
            self.init_items_from(train)
            self.config = self.config.model_copy(update={"spectral_init": False})
        return super().fit(shard(train, dist.get_rank(), dist.get_world_size()), validation)

    def _step(self, batch: Batch) -> float:
        self.sharded.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(batch)
        loss.backward()  # type: ignore[no-untyped-call]
        # The tables were updated inside the backward pass; the clip bounds the dense update.
        torch.nn.utils.clip_grad_norm_(
            list(self.sharded.dense_parameters().values()), self.config.grad_clip
        )
        self.optimizer.step()
        return float(loss.detach())

    @torch.no_grad()
    def evaluate(self, queries: Queries) -> dict[str, float]:
        """Metrics over all queries: each process ranks its share, the ranks are gathered."""
        world, rank = dist.get_world_size(), dist.get_rank()
        parts = np.array_split(np.arange(len(queries.targets)), world)
        chunks = max(1, math.ceil(max(len(p) for p in parts) / SCORE_CHUNK))
        mine: list[np.ndarray[Any, Any]] = []
        for piece in np.array_split(parts[rank], chunks):
            index = piece.tolist()
            histories = [queries.histories[i] for i in index]
            times = [queries.history_times[i] for i in index]
            # A process with nothing to rank still takes part in the lookups: one padding row.
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
        state = self.sharded.state_dict()
        if dist.get_rank() != 0:
            state = {k: v for k, v in state.items() if not k.startswith("encoder.")}
        return {k: v.cpu().contiguous() for k, v in state.items()}


def _mean_row_norm(shards: list[Shard], n_items: int) -> float:
    """The mean norm of item rows 1..n over every process's shards (collective); a row split by
    columns has its squared norm summed over its column shards first."""
    squares = torch.zeros(n_items + 1, dtype=torch.float64)
    for part in shards:
        rows = part.tensor.shape[0]
        squares[part.row : part.row + rows] += part.tensor.double().pow(2).sum(dim=1).cpu()
    dist.all_reduce(squares)
    return float(squares[1:].sqrt().mean())


# What the sharded engine implements of SessionTransformerConfig; any other option set away from
# its default (an offline-only training variant) is refused rather than silently ignored.
SUPPORTED_OPTIONS = frozenset({
    "dim", "heads", "layers", "ffn_multiplier", "max_len", "dropout", "n_negatives",
    "future_window", "future_decay", "mask_seen", "label_smoothing", "lr", "item_lr_multiplier",
    "weight_decay", "warmup_frac", "min_lr_frac", "grad_clip", "epochs", "batch_size",
    "spectral_init", "random_crops", "eval_every", "patience", "time_budget_s", "seed", "threads",
})


def refuse_unsupported(config: SessionTransformerConfig) -> None:
    if config.loss != "softmax":
        raise ValueError("a sharded retrain trains the full softmax (loss='softmax') only")
    defaults = SessionTransformerConfig()
    for name in sorted(set(type(config).model_fields) - SUPPORTED_OPTIONS - {"loss"}):
        if getattr(config, name) != getattr(defaults, name):
            raise ValueError(f"a sharded retrain does not implement option {name}")


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
    shapes = json.loads((out / "plan.json").read_text())["table_shapes"]
    parts = [load_file(str(p)) for p in sorted(out.glob("shard-*.safetensors"))]
    return assemble_parts(parts, {name: (rows, cols) for name, (rows, cols) in shapes.items()})


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
    device = (torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available()
              else torch.device("cpu"))
    trainer = ShardedSessionTrainer(data.train.n_items, config, args.budget_bytes, device)
    report = trainer.fit(data.train, data.validation)
    validation = trainer.evaluate(data.validation) if data.validation else {}
    examples = torch.tensor(float(report.examples), device=trainer.device)
    dist.all_reduce(examples)
    memory: list[Any] = [None] * world
    dist.all_gather_object(memory, {
        "embedding_bytes": trainer.sharded.embedding_bytes(),
        "planned_storage_bytes": trainer.plan.storage_bytes_by_rank[rank],
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    })
    args.out.mkdir(parents=True, exist_ok=True)
    save_file(trainer.local_tensors(), str(args.out / f"shard-{rank}.safetensors"))
    if rank == 0:
        (args.out / "plan.json").write_text(json.dumps({
            "tables": trainer.plan.tables,
            "table_shapes": table_shapes(data.train.n_items, config),
            "storage_bytes_by_rank": trainer.plan.storage_bytes_by_rank,
        }))
        (args.out / "result.json").write_text(json.dumps({
            "items": data.items, "validation": validation, "epochs": report.epochs,
            "world_size": world, "train_s": report.train_s, "examples": int(examples),
            "examples_per_s": float(examples) / max(report.train_s, 1e-9),
            "by_rank": memory,
        }))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, help="Retrain window (write_dataset's JSON).")
    parser.add_argument("--synthetic-items", type=int, default=0,
                        help="Instead of --data: random sequences over this many items.")
    parser.add_argument("--synthetic-users", type=int, default=256)
    parser.add_argument("--config", type=str, required=True, help="SessionTransformerConfig JSON")
    parser.add_argument("--budget-bytes", type=int, default=None,
                        help="Per-process storage for the embedding tables, as TorchRec's "
                             "planner counts it; the plan must fit it.")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    try:
        train_sharded(args)
    except PlanError as error:
        # Rank 0 plans for all, so every process refuses alike: no collective is pending.
        logger.error("plan refused rank=%d reason=%s", dist.get_rank(), error)
        if dist.get_rank() == 0:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "refused.json").write_text(json.dumps(
                {"error": str(error), "needed_bytes_by_rank": error.needed_bytes}
            ))
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
