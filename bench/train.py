"""Training benchmark of the session Transformer on MovieLens-100K.

Measures training throughput (next-item examples per second: one example = one predicted
position) and the time to reach the final accuracy: the first validation check whose NDCG@10
is within 2% (relative) of the best one the run reached. Test metrics of the restored best
weights are reported beside, on the held-out last item. Run with
``python -m bench.train`` or ``streamrec bench train``; writes bench/results/train_ml100k.json.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import time
from pathlib import Path
from typing import Any

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


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    started = time.perf_counter()
    result = run()
    result["wall_s"] = round(time.perf_counter() - started, 1)
    DEFAULT_JSON.parent.mkdir(parents=True, exist_ok=True)
    DEFAULT_JSON.write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)


if __name__ == "__main__":
    main()
