"""The crash-safe checkpoint folder every offset-tied checkpoint of the trainer is written to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from models.store import IntegrityError
from online_trainer.checkpoint import CheckpointFolder


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs, no cleanup handler catches it."""


def _write(folder: CheckpointFolder, n: int) -> None:
    folder.write({"w": torch.full((3,), float(n))}, {"step": n}, {"batches": n})


def test_what_is_written_reads_back_whole(tmp_path: Path) -> None:
    folder = CheckpointFolder(tmp_path, "ranker")
    assert not folder.exists()
    _write(folder, 1)
    _write(folder, 2)
    tensors, optimizer, state = CheckpointFolder(tmp_path, "ranker").read()
    assert torch.equal(tensors["w"], torch.full((3,), 2.0))
    assert optimizer == {"step": 2} and state["batches"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ranker"]


def test_two_folders_of_one_root_are_apart(tmp_path: Path) -> None:
    _write(CheckpointFolder(tmp_path, "checkpoint"), 1)
    _write(CheckpointFolder(tmp_path, "ranker"), 2)
    assert CheckpointFolder(tmp_path, "checkpoint").read()[2]["batches"] == 1
    assert CheckpointFolder(tmp_path, "ranker").read()[2]["batches"] == 2


@pytest.mark.parametrize("damaged", ["model.safetensors", "optimizer.pt"])
def test_a_file_that_differs_from_its_digest_is_refused_and_set_aside(
    tmp_path: Path, damaged: str
) -> None:
    folder = CheckpointFolder(tmp_path, "ranker")
    _write(folder, 1)
    path = folder.current / damaged
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(IntegrityError, match=damaged):
        folder.read()
    folder.set_aside()
    assert not folder.exists() and (tmp_path / "ranker.rejected" / damaged).exists()
    _write(folder, 2)  # the next write starts afresh beside the rejected copy
    assert folder.read()[2]["batches"] == 2


def test_a_kill_between_the_two_renames_recovers_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(CheckpointFolder(tmp_path, "ranker"), 1)
    rename = Path.rename

    def killed_after_the_first(self: Path, target: Any) -> Path:
        moved = rename(self, target)
        if self.name == "ranker":  # the current checkpoint went to its old name
            raise Killed
        return moved

    with monkeypatch.context() as killing:
        killing.setattr(Path, "rename", killed_after_the_first)
        with pytest.raises(Killed):
            _write(CheckpointFolder(tmp_path, "ranker"), 2)
    assert not (tmp_path / "ranker").exists() and (tmp_path / "ranker.old").exists()
    restarted = CheckpointFolder(tmp_path, "ranker")
    assert restarted.exists() and restarted.read()[2]["batches"] == 1
    _write(restarted, 3)
    assert CheckpointFolder(tmp_path, "ranker").read()[2]["batches"] == 3
