"""`streamrec eval`: offline, leave-one-out evaluation of every model and baseline."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import typer

log = logging.getLogger(__name__)


def eval_command(
    dataset: str | None = typer.Option(
        None, "--dataset", help="Built-in dataset to evaluate on: ml-100k."
    ),
    interactions: Path | None = typer.Option(
        None, "--interactions", help="CSV with header user_id,item_id,timestamp (seconds)."
    ),
    json_path: Path | None = typer.Option(None, "--json", help="Write the report JSON here."),
    exclude_seen: bool = typer.Option(
        True, "--exclude-seen/--include-seen", help="Drop already-seen items from rankings."
    ),
    epochs: int | None = typer.Option(
        None, help="Max session Transformer epochs (default: the config's; early stopping)."
    ),
    time_budget_s: float = typer.Option(1200.0, help="Wall-clock cap of Transformer training."),
    threads: int = typer.Option(0, help="torch CPU threads (0 = torch default)."),
    seed: int = typer.Option(0, help="Seed of every random choice (deterministic eval)."),
    rankers: bool = typer.Option(
        True, "--rankers/--no-rankers", help="Train the two-stage re-rankers (their rows)."
    ),
    variants: bool = typer.Option(
        False, "--variants", help="Also train the session Transformer's variants (reversed "
        "pre-training, genre pages as virtual items, masked-item objective) and compare each "
        "paired with it; each trains in a process of its own beside the main models.",
    ),
) -> None:
    """Leave-one-out, full-ranking evaluation of every model and baseline."""
    from bench.calibration import begin
    from bench.report import write_result
    from models.evaluation import evaluate_dataset, load_frame, load_items
    from models.session_config import SessionTransformerConfig

    begin()
    if (dataset is None) == (interactions is None):
        raise typer.BadParameter("give exactly one of --dataset or --interactions")
    name, frame = load_frame(dataset, interactions)
    overrides: dict[str, Any] = {"time_budget_s": time_budget_s, "threads": threads, "seed": seed}
    if epochs is not None:
        overrides["epochs"] = epochs
    config = SessionTransformerConfig(**overrides)
    report = evaluate_dataset(name, frame, config, exclude_seen=exclude_seen,
                              items=load_items(dataset), rankers=None if rankers else [],
                              variants=variants)
    if json_path is not None:
        write_result(json_path, report)
    _print_eval(report)


def _print_eval(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{report['dataset']}: leave-one-out, full ranking "
                        f"(exclude_seen={str(report['exclude_seen']).lower()})")
    for column in ("model", "HR@10", "NDCG@10", "Recall@20", "MRR@20", "train_s"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for name, m in report["models"].items():
        table.add_row(name, *(f"{m[k]:.4f}" for k in ("hr@10", "ndcg@10", "recall@20", "mrr@20")),
                      f"{m['train_s']:.1f}")
    console = Console()
    console.print(table)
    two_stage = report.get("two_stage")
    if two_stage:
        recall = next(key for key in two_stage if key.startswith("recall@"))
        console.print(f"retriever (session_transformer) {recall}: {two_stage[recall]:.4f}")
    for name, m in report["models"].items():
        versus = m.get("vs_transformer")
        if versus:
            low, high = versus["ci95"]
            console.print(f"{name} vs session_transformer: NDCG@10 x{versus['ratio']:.3f}, "
                          f"paired 95% CI of the difference [{low:+.4f}, {high:+.4f}]")
    margin = report.get("session_transformer_margin")
    if margin:
        console.print(
            f"session_transformer vs best baseline ({margin['best_baseline']}): "
            f"NDCG@10 {margin['relative_ndcg@10']:+.1%}; wall {report['wall_s']:.0f}s"
        )
