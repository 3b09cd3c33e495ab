"""Training benchmark of the session Transformer on MovieLens-100K.

Measures training throughput (next-item examples per second: one example = one predicted
position) and the time to reach the final accuracy: the first validation check whose NDCG@10
is within 2% (relative) of the best one the run reached. Test metrics of the restored best
weights are reported beside, on the held-out last item. Run with
``python -m bench.train`` or ``streamrec bench train``; writes bench/results/train_ml100k.json.

``run_sharded`` measures the hybrid-parallel retrain (online_trainer.distributed, TorchRec) under
torchrun: examples/s and validation NDCG@10 on 1 and 2 processes over the same ML-100K window and
epochs, the scaling efficiency, the sharding plan TorchRec's planner chose and the bytes each
process holds, examples/s and NDCG@10 against the batch size (the large-batch recipe of
SessionTransformerConfig.scaled_to_batch), and the capacity figure: the largest item table that
2 processes train sharded under a per-process budget that one process refuses.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import time
from pathlib import Path
from typing import Any

from bench.report import write_result

log = logging.getLogger(__name__)
DEFAULT_JSON = Path("bench/results/train_ml100k.json")
TARGET_SHARE = 0.98


def run(epochs: int | None = None, time_budget_s: float = 1200.0, threads: int = 0,
        seed: int = 0) -> dict[str, Any]:
    """Trains on ML-100K and returns the benchmark record."""
    import torch

    from models.datasets import load_ml100k
    from models.sequence_training import SessionTrainer
    from models.sequences import leave_one_out
    from models.session_config import SessionTransformerConfig

    if threads:
        torch.set_num_threads(threads)
    split = leave_one_out(load_ml100k())
    overrides: dict[str, Any] = {"time_budget_s": time_budget_s, "threads": threads, "seed": seed}
    if epochs is not None:
        overrides["epochs"] = epochs
    config = SessionTransformerConfig(**overrides)
    trainer = SessionTrainer(split.train.n_items, config)
    cpu_start = time.process_time()
    report = trainer.fit(split.train, split.validation)
    cpu_s = time.process_time() - cpu_start
    started = time.perf_counter()
    test = trainer.evaluate(split.test)
    scoring_s = time.perf_counter() - started
    target = TARGET_SHARE * report.best_val_ndcg10
    reached = next((t for _, t, ndcg in report.history if ndcg >= target), None)
    return {
        "dataset": "ml-100k",
        "model": "session_transformer",
        "device": str(trainer.device),
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "epochs_run": report.epochs,
        "best_epoch": report.best_epoch,
        "train_s": round(report.train_s, 1),
        "train_cpu_s": round(cpu_s, 1),
        "examples": report.examples,
        "examples_per_s": round(report.examples / max(report.train_s, 1e-9), 1),
        "examples_per_cpu_s": round(report.examples / max(cpu_s, 1e-9), 1),
        "host_load_avg_1m_at_end": round(os.getloadavg()[0], 2),
        "final_val_ndcg@10": report.best_val_ndcg10,
        "time_to_final_accuracy_s": None if reached is None else round(reached, 1),
        "time_to_final_accuracy_definition": f"first validation NDCG@10 >= {TARGET_SHARE} x best",
        "test": test,
        "full_ranking_queries_per_s": round(len(split.test.targets) / scoring_s, 1),
        "validation_curve": [
            {"epoch": e, "elapsed_s": round(t, 1), "val_ndcg@10": v} for e, t, v in report.history
        ],
        "config": config.model_dump(),
    }


def run_sharded(
    epochs: int = 3, batch_sizes: tuple[int, ...] = (32, 128, 512),
    budget_bytes: int = 32 << 20, seed: int = 0,
) -> dict[str, Any]:
    """The hybrid-parallel record (see the module docstring)."""
    import tempfile

    from models.datasets import load_ml100k
    from models.session_config import SessionTransformerConfig
    from online_trainer.distributed import write_dataset
    from online_trainer.online_model import Interaction, OnlineModel

    work = Path(tempfile.mkdtemp(prefix="streamrec-bench-train-"))
    frame = load_ml100k().sort_values("timestamp", kind="stable")
    interactions = [
        Interaction(str(u), str(i), int(t))
        for u, i, t in zip(frame["user_id"], frame["item_id"], frame["timestamp"], strict=True)
    ]
    config = SessionTransformerConfig(epochs=epochs, eval_every=epochs, threads=1, seed=seed)
    write_dataset(work / "data.json", interactions, OnlineModel(config).items)
    by_batch = {
        str(b): _window_run(work, config.scaled_to_batch(b), 1, f"batch-{b}") for b in batch_sizes
    }
    one = by_batch[str(config.batch_size)] if str(config.batch_size) in by_batch else (
        _window_run(work, config, 1, "one")
    )
    two = _window_run(work, config, 2, "two")
    plan = json.loads((work / "two" / "plan.json").read_text())
    return {
        "engine": "torchrec",
        "dataset": "ml-100k (all events, validation = each user's last)",
        "epochs": epochs,
        "by_processes": {"1": one, "2": two},
        "ndcg@10_ratio_2_to_1": round(two["ndcg@10"] / max(one["ndcg@10"], 1e-12), 3),
        "scaling_efficiency": round(two["examples_per_s"] / (2 * one["examples_per_s"]), 3),
        "sharding": plan["tables"],
        "bytes_per_process": {
            "embedding_weights": {"1": one["embedding_bytes_by_rank"],
                                  "2": two["embedding_bytes_by_rank"]},
            "planned_storage": {"1": one["planned_storage_bytes_by_rank"],
                                "2": two["planned_storage_bytes_by_rank"]},
            "planned_storage_counts": "TorchRec planner: weights, row-wise Adagrad state, "
                                      "the step's lookups (batch and whole catalog)",
        },
        "by_batch_size": by_batch,
        "capacity": _capacity(work, config, budget_bytes),
        "cpu_count": os.cpu_count(),
        "host_load_avg_1m_at_end": round(os.getloadavg()[0], 2),
    }


def _window_run(work: Path, config: Any, nproc: int, name: str) -> dict[str, Any]:
    from online_trainer.retrain_job import launch_distributed

    result = launch_distributed(work / "data.json", config.model_dump_json(), work / name, nproc)
    validation: dict[str, float] = result["validation"]  # type: ignore[assignment]
    by_rank: list[dict[str, int]] = result["by_rank"]  # type: ignore[assignment]
    return {
        "examples_per_s": round(float(result["examples_per_s"]), 1),  # type: ignore[arg-type]
        "ndcg@10": round(validation["ndcg@10"], 4),
        "hr@10": round(validation["hr@10"], 4),
        "train_s": round(float(result["train_s"]), 1),  # type: ignore[arg-type]
        "batch_size": config.batch_size,
        "lr": config.lr,
        "embedding_bytes_by_rank": [r["embedding_bytes"] for r in by_rank],
        "planned_storage_bytes_by_rank": [r["planned_storage_bytes"] for r in by_rank],
        "max_rss_bytes_by_rank": [r["max_rss_bytes"] for r in by_rank],
    }


def _capacity(work: Path, config: Any, budget_bytes: int) -> dict[str, Any]:
    """The largest item table TorchRec's planner fits on 2 processes within the budget (it
    cannot on 1): one process is asked to train it and refuses, two train it for one epoch."""
    import subprocess

    from online_trainer.retrain_job import launch_distributed

    small = config.model_copy(update={"epochs": 1, "spectral_init": False, "eval_every": 1})
    rows = _largest_fitting(small, budget_bytes, work / "planner-store")
    extra = ["--synthetic-items", str(rows), "--budget-bytes", str(budget_bytes)]
    try:
        launch_distributed(None, small.model_dump_json(), work / "cap-1", 1, *extra)
        one: object = "trained"
    except subprocess.CalledProcessError:
        one = json.loads((work / "cap-1" / "refused.json").read_text())
    two = launch_distributed(None, small.model_dump_json(), work / "cap-2", 2, *extra)
    return {
        "budget_bytes_per_process": budget_bytes,
        "budget_counts": "TorchRec planner's storage estimate per process",
        "item_rows": rows,
        "one_process": one,
        "two_processes": {
            "examples_per_s": round(float(two["examples_per_s"]), 1),  # type: ignore[arg-type]
            "by_rank": two["by_rank"],
        },
    }


def _largest_fitting(config: Any, budget_bytes: int, store: Path) -> int:
    """Binary search of the item rows whose 2-process plan fits the budget, planning in this
    process (a one-member process group: the planner needs one, not the processes)."""
    import torch
    import torch.distributed as dist

    from models.sharded_session import SessionModule, apply_table_optimizer
    from models.sharding_plan import PlanError, plan_tables
    from online_trainer.distributed import table_optimizer

    per_process = config.model_copy(update={"batch_size": max(1, config.batch_size // 2)})

    def fits(rows: int) -> bool:
        module = SessionModule(rows, per_process)
        apply_table_optimizer(module, table_optimizer(per_process))
        try:
            plan_tables(module, 2, torch.device("cpu"), per_process.batch_size, budget_bytes)
        except PlanError:
            return False
        return True

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    try:
        low, high = 1, 1 << 24
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if fits(middle) else (low, middle - 1)
    finally:
        dist.destroy_process_group()
    return low


def print_table(result: dict[str, Any]) -> None:
    """The short human-readable summary (the only printing in this module)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="bench train: session Transformer on ML-100K")
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("device / threads", f"{result['device']} / {result['torch_threads']}"),
        ("examples/s (wall)", f"{result['examples_per_s']:.0f}"),
        ("examples/s (per CPU-second)", f"{result['examples_per_cpu_s']:.0f}"),
        ("epochs (best)", f"{result['epochs_run']} ({result['best_epoch']})"),
        ("train_s wall / CPU", f"{result['train_s']:.1f} / {result['train_cpu_s']:.1f}"),
        ("time to final accuracy (s)", str(result["time_to_final_accuracy_s"])),
        ("val NDCG@10", f"{result['final_val_ndcg@10']:.4f}"),
        ("test NDCG@10", f"{result['test']['ndcg@10']:.4f}"),
        ("test HR@10", f"{result['test']['hr@10']:.4f}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    Console().print(table)


def print_sharded(result: dict[str, Any]) -> None:
    from bench.report import print_table as print_rows

    rows = [(f"{n} process(es) examples/s / NDCG@10",
             f"{r['examples_per_s']:.0f} / {r['ndcg@10']:.4f}")
            for n, r in result["by_processes"].items()]
    rows += [(f"batch {b} (lr {r['lr']:.3g}) examples/s / NDCG@10",
              f"{r['examples_per_s']:.0f} / {r['ndcg@10']:.4f}")
             for b, r in result["by_batch_size"].items()]
    capacity = result["capacity"]
    rows += [("scaling efficiency (2 processes)", str(result["scaling_efficiency"])),
             ("item rows trained sharded, not on 1 process", str(capacity["item_rows"]))]
    print_rows(f"bench train, engine {result['engine']}", rows)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    started = time.perf_counter()
    result = run()
    result["wall_s"] = round(time.perf_counter() - started, 1)
    write_result(DEFAULT_JSON, result)
    print_table(result)


if __name__ == "__main__":
    main()
