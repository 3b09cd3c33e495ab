from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from models.sharded_session import TABLES, table_shapes
from online_trainer.distributed import assemble, write_dataset
from online_trainer.online_model import Interaction, OnlineModel
from online_trainer.retrain import full_retrain
from online_trainer.retrain_job import distributed_retrain, launch_distributed
from tests.integration.online_trainer.conftest import TINY

CONFIG = TINY.model_copy(update={"epochs": 8, "batch_size": 128, "dropout": 0.0})

# On this data the single-process NDCG@10 of seeds 0-5 spans 0.054-0.070 (standard deviation
# 0.006). The sharded engine on 1 and 2 processes starts from the same weights (rows are drawn
# per block of rows, whatever the split) and differs only in how each step's users are split:
# bound one standard deviation. The single-process trainer is another recipe (its tables start
# from another draw and train with AdamW under a whole-model clip; TorchRec's fused kernels
# train them with row-wise Adagrad, FBGEMM having no Adam on CPU, and the clip bounds the dense
# part): the sharded engine must not fall below it by more than the seed range.
SAME_START_TOLERANCE = 0.006
SEED_RANGE = 0.016
HIT_TOLERANCE = 8 / 329  # HR@10 moves in steps of one of the 329 validation users


def _interactions(ml100k: pd.DataFrame) -> list[Interaction]:
    frame = ml100k.iloc[:30_000]
    return [
        Interaction(str(u), str(i), int(t))
        for u, i, t in zip(frame["user_id"], frame["item_id"], frame["timestamp"], strict=True)
    ]


def test_two_sharded_processes_match_one_within_the_seed_spread_and_learn_as_the_trainer(
    ml100k: pd.DataFrame,
) -> None:
    interactions = _interactions(ml100k)
    single = full_retrain(interactions, OnlineModel(CONFIG), CONFIG)
    one = distributed_retrain(interactions, OnlineModel(CONFIG), 1, CONFIG.model_dump_json())
    two = distributed_retrain(interactions, OnlineModel(CONFIG), 2, CONFIG.model_dump_json())
    print("trainer:", single.validation, "sharded 1:", one.validation, "sharded 2:", two.validation)
    assert single.validation["hr@10"] > 0.1 and two.validation["hr@10"] > 0.1  # both learned
    assert abs(two.validation["ndcg@10"] - one.validation["ndcg@10"]) <= SAME_START_TOLERANCE
    assert two.validation["ndcg@10"] >= single.validation["ndcg@10"] - SEED_RANGE
    assert two.validation["hr@10"] >= single.validation["hr@10"] - HIT_TOLERANCE
    assert set(two.model.items.mapping()) == set(single.model.items.mapping())


def test_each_process_holds_only_its_shards_about_half_of_the_tables(
    ml100k: pd.DataFrame, tmp_path: Path
) -> None:
    model = OnlineModel(CONFIG)
    write_dataset(tmp_path / "data.json", _interactions(ml100k), model.items)
    config = CONFIG.model_copy(update={"epochs": 1})
    result = launch_distributed(
        tmp_path / "data.json", config.model_dump_json(), tmp_path / "out", 2
    )
    n_items = len(result["items"])  # type: ignore[arg-type]
    shapes = table_shapes(n_items, config)
    total = sum(rows * columns * 4 for rows, columns in shapes.values())
    held = [rank["embedding_bytes"] for rank in result["by_rank"]]  # type: ignore[attr-defined]
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    print("embedding bytes per process:", held, "of", total, "plan:", plan["tables"])
    assert sum(held) == total  # every row is held exactly once
    assert all(0.4 * total <= h <= 0.6 * total for h in held)
    kinds = {table["kind"] for table in plan["tables"].values()}
    assert kinds <= {"table_wise", "row_wise", "column_wise"}
    assert plan["tables"]["item"]["kind"] != "table_wise"  # the largest table is split
    tensors = assemble(tmp_path / "out")
    assert tensors["item_embedding.weight"].shape == shapes["item"]
    assert all(target in tensors for target in TABLES.values())


def test_a_budget_one_process_cannot_meet_is_refused_and_two_sharded_processes_train(
    tmp_path: Path,
) -> None:
    config = CONFIG.model_copy(update={"epochs": 1, "spectral_init": False})
    synthetic = ["--synthetic-items", "20000"]
    # A budget of one byte is refused, and the refusal says what one process would need.
    with pytest.raises(subprocess.CalledProcessError):
        launch_distributed(None, config.model_dump_json(), tmp_path / "probe", 1, *synthetic,
                           "--budget-bytes", "1")
    (one_process,) = json.loads((tmp_path / "probe" / "refused.json").read_text())[
        "needed_bytes_by_rank"
    ]
    budget = int(0.85 * one_process)
    with pytest.raises(subprocess.CalledProcessError):
        launch_distributed(None, config.model_dump_json(), tmp_path / "one", 1, *synthetic,
                           "--budget-bytes", str(budget))
    refusal = json.loads((tmp_path / "one" / "refused.json").read_text())
    assert "over the per-process budget" in refusal["error"]
    result = launch_distributed(None, config.model_dump_json(), tmp_path / "two", 2, *synthetic,
                                "--budget-bytes", str(budget))
    assert int(result["examples"]) > 0  # type: ignore[call-overload]
    by_rank = result["by_rank"]
    print("budget", budget, "one process needs", one_process, "two hold", by_rank)
    assert all(r["planned_storage_bytes"] <= budget for r in by_rank)  # type: ignore[attr-defined]
    assert all(r["embedding_bytes"] < one_process / 2 for r in by_rank)  # type: ignore[attr-defined]
