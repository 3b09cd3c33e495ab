"""Chronological user sequences and the leave-one-out split.

Items are re-indexed to ``1..n_items``; index 0 is padding everywhere (sequence models and
score matrices share this layout, so a score matrix has ``n_items + 1`` columns and column 0 is
never recommended).

Leave-one-out: each user's events are sorted by time (ties keep file order). The last event is
the test target, the second-to-last the validation target, and everything before is training
data. Validation queries see the training prefix; test queries see the training prefix plus the
validation item (that item is history at test time, never a training label). Users with fewer
than three events only contribute training data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

IntArray = npt.NDArray[np.int64]
MIN_EVENTS_FOR_EVAL = 3


@dataclass(frozen=True)
class UserSequences:
    """Per-user chronological item indices (1-based) and timestamps (seconds)."""

    items: list[IntArray]
    times: list[IntArray]
    n_items: int

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True)
class Queries:
    """What a recommender sees when asked for the next item: history and the request time."""

    histories: list[IntArray]
    history_times: list[IntArray]
    query_times: IntArray
    targets: IntArray


@dataclass(frozen=True)
class LeaveOneOutSplit:
    """Training sequences plus validation and test queries over the same item index."""

    train: UserSequences
    validation: Queries
    test: Queries
    item_ids: list[str]
    user_ids: list[str]


def encode(frame: pd.DataFrame) -> tuple[UserSequences, list[str], list[str]]:
    """Groups a ``user_id,item_id,timestamp`` frame into per-user chronological sequences."""
    ordered = frame.reset_index(drop=True)
    ordered = ordered.iloc[
        np.lexsort((np.arange(len(ordered)), ordered["timestamp"].to_numpy(),
                    ordered["user_id"].to_numpy()))
    ]
    item_codes, item_ids = pd.factorize(ordered["item_id"], sort=True)
    user_codes, user_ids = pd.factorize(ordered["user_id"], sort=False)
    items = item_codes.astype(np.int64) + 1
    times = ordered["timestamp"].to_numpy(dtype=np.int64)
    bounds = np.flatnonzero(np.diff(user_codes)) + 1
    seq_items = [np.ascontiguousarray(a) for a in np.split(items, bounds)]
    seq_times = [np.ascontiguousarray(a) for a in np.split(times, bounds)]
    sequences = UserSequences(items=seq_items, times=seq_times, n_items=len(item_ids))
    return sequences, [str(i) for i in item_ids], [str(u) for u in user_ids]


def leave_one_out(frame: pd.DataFrame) -> LeaveOneOutSplit:
    """Builds the chronological leave-one-out split described in the module docstring."""
    sequences, item_ids, user_ids = encode(frame)
    train_items: list[IntArray] = []
    train_times: list[IntArray] = []
    val: list[tuple[IntArray, IntArray, int, int]] = []
    test: list[tuple[IntArray, IntArray, int, int]] = []
    for items, times in zip(sequences.items, sequences.times, strict=True):
        if len(items) < MIN_EVENTS_FOR_EVAL:
            train_items.append(items)
            train_times.append(times)
            continue
        train_items.append(items[:-2])
        train_times.append(times[:-2])
        val.append((items[:-2], times[:-2], int(times[-2]), int(items[-2])))
        test.append((items[:-1], times[:-1], int(times[-1]), int(items[-1])))
    return LeaveOneOutSplit(
        train=UserSequences(train_items, train_times, sequences.n_items),
        validation=_queries(val),
        test=_queries(test),
        item_ids=item_ids,
        user_ids=user_ids,
    )


def _queries(rows: list[tuple[IntArray, IntArray, int, int]]) -> Queries:
    return Queries(
        histories=[r[0] for r in rows],
        history_times=[r[1] for r in rows],
        query_times=np.array([r[2] for r in rows], dtype=np.int64),
        targets=np.array([r[3] for r in rows], dtype=np.int64),
    )
