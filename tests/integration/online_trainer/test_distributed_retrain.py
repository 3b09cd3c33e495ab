from __future__ import annotations

import pandas as pd

from online_trainer.online_model import Interaction, OnlineModel
from online_trainer.retrain import full_retrain
from online_trainer.retrain_job import distributed_retrain
from tests.integration.online_trainer.conftest import TINY

CONFIG = TINY.model_copy(update={"epochs": 8, "batch_size": 128, "dropout": 0.0})


def test_two_processes_under_torchrun_match_one_process_within_tolerance(
    ml100k: pd.DataFrame,
) -> None:
    frame = ml100k.iloc[:30_000]
    interactions = [
        Interaction(str(u), str(i), int(t))
        for u, i, t in zip(frame["user_id"], frame["item_id"], frame["timestamp"], strict=True)
    ]
    single = full_retrain(interactions, OnlineModel(CONFIG), CONFIG)
    double = distributed_retrain(interactions, OnlineModel(CONFIG), 2, CONFIG.model_dump_json())
    print("1 process:", single.validation, "2 processes:", double.validation)
    assert single.validation["hr@10"] > 0.02  # both actually learned something
    assert abs(double.validation["ndcg@10"] - single.validation["ndcg@10"]) <= 0.02
    assert abs(double.validation["hr@10"] - single.validation["hr@10"]) <= 0.04
    assert set(double.model.items.mapping()) == set(single.model.items.mapping())
