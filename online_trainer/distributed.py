"""Data-parallel full retrain under torchrun: `python -m torch.distributed.run --nproc_per_node N
-m online_trainer.distributed --data FILE --out DIR`.

Every rank builds the same id space and initial weights (same seed), trains on an equal shard of
the users and averages gradients with all_reduce before each optimiser step, so the weights stay
identical on every rank and the global batch equals the single-process one (each rank takes
batch_size / world users per step). Early stopping is driven by the same validation set on
identical weights, hence identical decisions on every rank; the wall-clock budget is replaced by
the epoch cap because clocks differ between ranks and a divergent stop would deadlock.
Backend: gloo on CPU, NCCL on CUDA.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from safetensors.torch import save_file

from models.sequence_training import Batch, FitReport, SessionTrainer
from models.sequences import Queries, UserSequences
from models.session_config import SessionTransformerConfig
from online_trainer.online_model import Interaction, OnlineModel
from online_trainer.retrain import full_retrain
from online_trainer.vocabulary import IdVocabulary, VocabularyLimits

logger = logging.getLogger(__name__)


class AllReduceTrainer(SessionTrainer):
    """SessionTrainer whose gradients are averaged across ranks before every step."""

    def _step(self, batch: Batch) -> float:
        self.model.train()
        self.optimizer.zero_grad(set_to_none=False)
        loss = self.loss(batch)
        loss.backward()  # type: ignore[no-untyped-call]
        world = dist.get_world_size()
        for param in self.model.parameters():
            if param.grad is None:
                param.grad = torch.zeros_like(param)
            dist.all_reduce(param.grad, op=dist.ReduceOp.SUM)
            param.grad /= world
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.optimizer.step()
        return float(loss.detach())

    def fit(self, train: UserSequences, validation: Queries | None = None) -> FitReport:
        # Everything that decides the weights must be identical on every rank, or the ranks
        # diverge and their early-stopping decisions (hence their collectives) stop matching:
        # the item initialisation comes from the whole training set, not from this rank's shard,
        # and rank 0's initial weights are broadcast like DistributedDataParallel does.
        if self.config.spectral_init:
            self.init_items_from(train)
            self.config = self.config.model_copy(update={"spectral_init": False})
        with torch.no_grad():
            for param in self.model.parameters():
                dist.broadcast(param, src=0)
        return super().fit(shard(train, dist.get_rank(), dist.get_world_size()), validation)


def shard(train: UserSequences, rank: int, world: int) -> UserSequences:
    """Equal-sized shards of trainable users, so every rank takes the same number of steps."""
    users = [u for u, s in enumerate(train.items) if len(s) >= 2]
    per_rank = len(users) // world
    mine = users[rank * per_rank : (rank + 1) * per_rank]
    return UserSequences(
        [train.items[u] for u in mine], [train.times[u] for u in mine], train.n_items
    )


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--config", type=str, required=True, help="SessionTransformerConfig JSON")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    config = SessionTransformerConfig.model_validate_json(args.config)
    config = config.model_copy(
        update={
            "batch_size": max(1, config.batch_size // world),
            "time_budget_s": 1e9,
        }
    )
    raw = json.loads(args.data.read_text())
    interactions = [Interaction(u, i, int(t)) for u, i, t in raw["events"]]
    min_count, max_rows = raw["item_limits"]
    limits = VocabularyLimits(min_count, max_rows)
    base = OnlineModel(config, IdVocabulary(raw["items"], limits, raw["item_sightings"]))
    result = full_retrain(interactions, base, config, "scratch", trainer_factory=AllReduceTrainer)
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        save_file(
            {k: v.contiguous() for k, v in result.model.tensors().items()},
            str(args.out / "model.safetensors"),
        )
        (args.out / "result.json").write_text(
            json.dumps(
                {
                    "items": result.model.items.mapping(),
                    "validation": result.validation,
                    "epochs": result.report.epochs,
                    "world_size": world,
                    "train_s": result.report.train_s,
                }
            )
        )
    dist.barrier()
    dist.destroy_process_group()
    logger.info("rank=%d/%d done", rank, world)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    np.seterr(all="ignore")
    main()
