"""A trainer killed at any point of a checkpoint save restarts from a whole checkpoint."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from online_trainer.checkpoint import CheckpointStore, TrainerState
from online_trainer.histories import UserHistories
from online_trainer.vocabulary import IdVocabulary


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs, no cleanup handler catches it."""


def _save(store: CheckpointStore, batches: int) -> None:
    store.save(
        {"w": torch.full((2,), float(batches))}, {}, IdVocabulary({"a": 1}),
        UserHistories(max_len=5, max_users=10), TrainerState(offsets={0: batches}, batches=batches),
    )


def _file_steps(monkeypatch: pytest.MonkeyPatch, kill_at: int | None) -> list[str]:
    """Counts the save's folder operations (renames, deletions) and kills at step `kill_at`."""
    steps: list[str] = []
    rename, rmtree = Path.rename, shutil.rmtree

    def step(name: str) -> None:
        steps.append(name)
        if kill_at is not None and len(steps) == kill_at:
            raise Killed(name)

    def counted_rename(self: Path, target: Any) -> Path:
        step(f"rename {self.name}")
        return rename(self, target)

    def counted_rmtree(path: Any, *args: Any, **kwargs: Any) -> None:
        step(f"rmtree {Path(path).name}")
        rmtree(path, *args, **kwargs)

    monkeypatch.setattr(Path, "rename", counted_rename)
    monkeypatch.setattr(shutil, "rmtree", counted_rmtree)
    return steps


def test_every_kill_point_of_a_save_leaves_the_old_or_the_new_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as counting:
        _save(CheckpointStore(tmp_path / "probe"), 1)
        steps = _file_steps(counting, None)
        _save(CheckpointStore(tmp_path / "probe"), 2)
    assert len(steps) >= 4  # the folder operations of a save over an existing checkpoint

    for kill_at in range(1, len(steps) + 1):
        root = tmp_path / f"kill{kill_at}"
        _save(CheckpointStore(root), 1)
        with monkeypatch.context() as killing:
            _file_steps(killing, kill_at)
            with pytest.raises(Killed):
                _save(CheckpointStore(root), 2)
        restarted = CheckpointStore(root)
        assert restarted.exists(), f"no checkpoint after a kill at step {kill_at}"
        tensors, _, _, _, state = restarted.load(5, 10)
        assert state.batches in (1, 2)
        assert state.offsets == {0: state.batches}
        assert torch.equal(tensors["w"], torch.full((2,), float(state.batches)))
        _save(restarted, 3)  # and the next save works from there
        assert CheckpointStore(root).load(5, 10)[4].batches == 3
