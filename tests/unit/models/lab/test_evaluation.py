"""Evaluation harness: every model gets the four metrics, margins are computed as stated."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from models.lab.evaluation import evaluate_dataset, load_frame, margin_over_baselines
from models.session_config import SessionTransformerConfig


def _frame(n_users: int = 40, n_items: int = 15, length: int = 8) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for user in range(n_users):
        start = int(rng.integers(0, n_items))
        for step in range(length):
            rows.append((f"u{user}", f"i{(start + step) % n_items}", 1_000 * user + 60 * step))
    return pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"])


def test_report_has_every_model_and_metric_and_is_json() -> None:
    config = SessionTransformerConfig(dim=16, heads=2, layers=1, max_len=8, epochs=10,
                                      eval_every=5, batch_size=8)
    report = evaluate_dataset("synthetic", _frame(), config)
    assert report["exclude_seen"] is True
    assert set(report["models"]) == {
        "popularity", "recent_popularity", "item_knn", "markov", "session_transformer",
        "two_stage_dlrm", "two_stage_gbm", "two_stage_served",
    }
    for metrics in report["models"].values():
        assert {"hr@10", "ndcg@10", "recall@20", "mrr@20", "train_s"} <= set(metrics)
        assert 0.0 <= metrics["ndcg@10"] <= metrics["hr@10"] <= 1.0
    # A deterministic successor pattern: the sequential models must find it.
    assert report["models"]["markov"]["hr@10"] == 1.0
    json.dumps(report)


def test_two_stage_rows_compare_paired_with_the_transformer() -> None:
    config = SessionTransformerConfig(dim=16, heads=2, layers=1, max_len=8, epochs=5,
                                      eval_every=5, batch_size=8)
    items = pd.DataFrame({
        "item_id": [f"i{j}" for j in range(15)],
        "release_year": [1990.0 + j for j in range(15)],
        "genres": [("drama",) if j % 2 else ("comedy", "drama") for j in range(15)],
    })
    report = evaluate_dataset("synthetic", _frame(), config, items=items)
    transformer = report["models"]["session_transformer"]
    assert 0.0 <= transformer["ndcg@10"] <= transformer["recall@100"] <= 1.0
    assert report["two_stage"]["recall@100"] == transformer["recall@100"]
    for name in ("two_stage_dlrm", "two_stage_gbm", "two_stage_served"):
        row = report["models"][name]
        assert 0.0 <= row["ndcg@10"] <= row["hr@10"] <= transformer["recall@100"]
        versus = row["vs_transformer"]
        assert versus["ratio"] == pytest.approx(row["ndcg@10"] / transformer["ndcg@10"])
        low, high = versus["ci95"]
        assert low <= versus["ndcg@10_diff"] <= high
    json.loads(json.dumps(report))


def test_margin_is_relative_to_the_strongest_baseline() -> None:
    results = {
        "popularity": {"ndcg@10": 0.05}, "markov": {"ndcg@10": 0.10},
        "session_transformer": {"ndcg@10": 0.12},
    }
    margin = margin_over_baselines(results)
    assert margin is not None
    assert margin["best_baseline"] == "markov"
    assert margin["relative_ndcg@10"] == pytest.approx(0.2)


def test_a_sequence_file_runs_with_one_call_and_the_report_names_data_protocol_and_budget(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bench.txt"
    frame = _frame()
    lines = [" ".join([user, *group["item_id"]]) for user, group in frame.groupby("user_id")]
    path.write_text("\n".join(lines) + "\n")
    data = load_frame(None, sequences=path)
    assert data.name == "bench" and data.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    config = SessionTransformerConfig(dim=16, heads=2, layers=1, epochs=3, eval_every=5)
    report = evaluate_dataset(data.name, data.frame, config, rankers=[], sha256=data.sha256)
    assert report["dataset_sha256"] == data.sha256
    assert "history excluded" in report["protocol"] and report["seed"] == 0
    assert report["examples_per_s"] > 0 and report["wall_s"] > 0 and report["cpu_s"] > 0
    assert report["session_transformer_budget"]["epochs"] == 3
    assert report["session_transformer_budget"]["capped_by_wall_clock"] is False
    transformer = report["models"]["session_transformer"]
    assert 0.0 <= transformer["ndcg@10"] <= transformer["hr@10"] <= 1.0
    # The recipe's data-derived settings are what the report says was trained.
    assert report["session_transformer_config"]["max_len"] == 50
    json.dumps(report)


def test_exactly_one_data_source_is_accepted(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        load_frame("ml-100k", sequences=tmp_path / "x.txt")
    with pytest.raises(ValueError, match="exactly one"):
        load_frame(None)
