"""The events one demo run replays: ML-100K with its item content by default, or any CSV of
``user_id,item_id,timestamp`` (models.datasets.load_interactions_csv). Split by time: the first
`pretrain_share` pre-trains version 1.0 and is the feature store's backfill, the rest is
replayed live. Loaded and checked before anything starts, so a file the run cannot use is
refused at the door with its name and the problem."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from deploy.demo.settings import DemoSettings
from models.datasets import (
    ML100K_SHA256,
    DatasetError,
    load_interactions_csv,
    load_ml100k,
    load_ml100k_items,
    sha256_of,
)
from schemas.fields import is_id
from schemas.limits import MAX_ID_LENGTH

ML100K = "ml-100k"


@dataclass(frozen=True)
class DemoDataset:
    name: str
    """`ml-100k`, or the CSV's path as given."""
    sha256: str
    """Of the file read (ML-100K's pinned ``ml-100k.inter``, or the CSV's bytes)."""
    first: pd.DataFrame
    """Pre-training and backfill, in time order."""
    second: pd.DataFrame
    """Replayed live, in time order."""
    items: pd.DataFrame | None
    """Item content for `catalog.items`; None for a CSV (the scorer ranks without content)."""


def load(settings: DemoSettings) -> DemoDataset:
    """The dataset of `settings`, split; DatasetError when the run cannot replay it."""
    path = settings.interactions
    if path is None:
        frame = load_ml100k()
        name, digest, items = ML100K, ML100K_SHA256, load_ml100k_items()
    else:
        frame = load_interactions_csv(path)
        _check_ids(path, frame)
        name, digest, items = str(path), sha256_of(path), None
    first, second = split(frame, settings.pretrain_share)
    needed = events_needed(settings.pretrain_share, settings.live_events or 1)
    if len(frame) < needed:
        live = settings.live_events or 1
        raise DatasetError(
            f"{name}: {len(frame)} events, the run needs at least {needed} (the first "
            f"{settings.pretrain_share:.0%} pre-trains, then {live} live)")
    return DemoDataset(name, digest, first, second, items)


def split(frame: pd.DataFrame, share: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    ordered = frame.sort_values("timestamp", kind="stable").reset_index(drop=True)
    cut = int(len(ordered) * share)
    return ordered.iloc[:cut], ordered.iloc[cut:]


def events_needed(pretrain_share: float, live: int) -> int:
    """The fewest events whose split leaves at least one to pre-train on and `live` after."""
    # n - int(n * share) < n * (1 - share) + 1: no fewer than this can leave `live` after.
    n = max(2, int((live - 1) / (1.0 - pretrain_share)))
    while int(n * pretrain_share) < 1 or n - int(n * pretrain_share) < live:
        n += 1
    return n


def _check_ids(path: Path, frame: pd.DataFrame) -> None:
    """Ids travel in events (schemas.fields.Id): printable ASCII without spaces."""
    for column in ("user_id", "item_id"):
        bad = ~frame[column].map(is_id).to_numpy(dtype=bool)
        if bad.any():
            raise DatasetError(
                f"{path}: {column} {frame[column].to_numpy()[bad][0]!r} is not an id "
                f"(1 to {MAX_ID_LENGTH} printable ASCII characters, no spaces)")
