"""The demo's dataset door: a CSV replaces ML-100K, split by time, and a file the run cannot
replay (too few events for the pre-training share and the live events, ids that cannot travel
in events) is refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.demo.dataset import events_needed, load
from deploy.demo.settings import DemoSettings
from models.datasets import DatasetError, sha256_of


def _csv(path: Path, events: int, user: str = "u") -> Path:
    # Written out of time order: the split sorts by timestamp.
    rows = [f"{user}{n % 7},i{n % 11},{1_000_000 + n}" for n in reversed(range(events))]
    path.write_text("user_id,item_id,timestamp\n" + "\n".join(rows) + "\n")
    return path


def test_a_csv_replaces_ml100k_split_by_time_with_its_name_and_digest(tmp_path: Path) -> None:
    path = _csv(tmp_path / "mine.csv", 40)
    data = load(DemoSettings(interactions=path, pretrain_share=0.75, live_events=10))
    assert (data.name, data.sha256, data.items) == (str(path), sha256_of(path), None)
    assert len(data.first) == 30 and len(data.second) == 10
    assert data.first["timestamp"].is_monotonic_increasing
    assert data.first["timestamp"].max() < data.second["timestamp"].min()


def test_too_few_events_for_the_pretraining_share_and_the_live_events_are_refused(
    tmp_path: Path,
) -> None:
    path = _csv(tmp_path / "small.csv", 1198)
    with pytest.raises(DatasetError, match=r"small\.csv: 1198 events, the run needs at least "
                                           r"1199 \(the first 50% pre-trains, then 600 live\)"):
        load(DemoSettings(interactions=path, pretrain_share=0.5, live_events=600))
    assert len(load(DemoSettings(interactions=_csv(path, 1199), pretrain_share=0.5,
                                 live_events=600)).second) == 600


@pytest.mark.parametrize(("share", "live"), [(0.5, 600), (0.3, 7), (0.99, 1), (0.01, 1)])
def test_events_needed_is_the_fewest_that_split_into_both_parts(share: float, live: int) -> None:
    n = events_needed(share, live)

    def enough(m: int) -> bool:
        return int(m * share) >= 1 and m - int(m * share) >= live

    assert enough(n) and not enough(n - 1)


def test_ids_that_cannot_travel_in_events_are_refused(tmp_path: Path) -> None:
    path = _csv(tmp_path / "spaces.csv", 20, user="a user ")
    with pytest.raises(DatasetError, match=r"spaces\.csv: user_id 'a user \d' is not an id"):
        load(DemoSettings(interactions=path, live_events=5))
