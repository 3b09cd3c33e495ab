"""Leave-one-out split: chronological, and held-out items never leak into training."""

from __future__ import annotations

import pandas as pd

from models.sequences import leave_one_out


def _frame() -> pd.DataFrame:
    return pd.DataFrame({
        "user_id": ["u", "u", "u", "u", "v", "v", "w"],
        "item_id": ["d", "a", "b", "c", "a", "b", "c"],
        "timestamp": [40, 10, 20, 30, 5, 6, 1],
    })


def test_last_event_is_test_and_second_to_last_is_validation() -> None:
    split = leave_one_out(_frame())
    index = {item: k + 1 for k, item in enumerate(split.item_ids)}
    u = split.user_ids.index("u")
    assert split.train.items[u].tolist() == [index["a"], index["b"]]
    assert split.validation.targets.tolist() == [index["c"]]
    assert split.test.targets.tolist() == [index["d"]]
    assert split.test.histories[0].tolist() == [index["a"], index["b"], index["c"]]
    assert split.validation.query_times.tolist() == [30]
    assert split.test.query_times.tolist() == [40]


def test_short_users_only_train() -> None:
    split = leave_one_out(_frame())
    assert len(split.test.targets) == 1
    v = split.user_ids.index("v")
    assert len(split.train.items[v]) == 2


def test_ties_keep_file_order() -> None:
    frame = pd.DataFrame({"user_id": ["u"] * 4, "item_id": ["x", "y", "z", "q"],
                          "timestamp": [1, 1, 1, 2]})
    split = leave_one_out(frame)
    names = [split.item_ids[i - 1] for i in split.test.histories[0]]
    assert names == ["x", "y", "z"]
