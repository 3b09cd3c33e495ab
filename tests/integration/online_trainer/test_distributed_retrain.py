from __future__ import annotations

import pandas as pd

from online_trainer.online_model import Interaction, OnlineModel
from online_trainer.retrain import full_retrain
from online_trainer.retrain_job import distributed_retrain
from tests.integration.online_trainer.conftest import TINY

CONFIG = TINY.model_copy(update={"epochs": 8, "batch_size": 128, "dropout": 0.0})


# The two runs share seed, data and global batch; they differ only in how each step's users are
# split across ranks (per-rank shuffles, gradient sums in another order). On this data the
# single-process NDCG@10 of seeds 0-5 spans 0.054-0.070 (standard deviation 0.006), while the
# same seed on 1 and 2 processes differed by at most 0.003. So the bound is one seed-to-seed
# standard deviation: a sharding that changed what is learned would move further.
NDCG_TOLERANCE = 0.006
HIT_TOLERANCE = 4 / 329  # HR@10 moves in steps of one of the 329 validation users: 4 of them


def test_two_processes_under_torchrun_match_one_process_within_the_seed_spread(
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
    assert single.validation["hr@10"] > 0.1  # both actually learned something
    assert abs(double.validation["ndcg@10"] - single.validation["ndcg@10"]) <= NDCG_TOLERANCE
    assert abs(double.validation["hr@10"] - single.validation["hr@10"]) <= HIT_TOLERANCE
    assert set(double.model.items.mapping()) == set(single.model.items.mapping())
