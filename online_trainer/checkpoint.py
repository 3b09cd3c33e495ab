"""Offset-tied checkpoints: the trainer's whole state saved with the consumer offsets it covers.

On start the trainer loads the newest checkpoint and seeks its partitions to the stored offsets
(not to the group's committed ones), so the model and its position always agree: a crash loses
only work done after the checkpoint, and that work is redone exactly once.
Writes go to a staging folder renamed into place, so a crash mid-write leaves the previous
checkpoint intact; a crash between the renames leaves it under its old name, restored on open.
The state file records the digests of the weights and optimizer files, and a load checks them
(IntegrityError): a checkpoint whose bytes changed on disk is never resumed from.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from models.store import IntegrityError
from online_trainer.histories import UserHistories
from online_trainer.ledger import OffsetLedger
from online_trainer.vocabulary import IdVocabulary, VocabularyLimits

logger = logging.getLogger(__name__)

_WEIGHTS = "model.safetensors"
_OPTIMIZER = "optimizer.pt"
_STATE = "state.json"
_HISTORIES = "histories."
"""Prefix of the user histories' arrays among the checkpoint's tensors."""


@dataclass
class TrainerState:
    """Everything besides the weights that must roll back together with them."""

    offsets: dict[int, int] = field(default_factory=dict)
    """partition -> next offset to train."""
    ledger: OffsetLedger = field(default_factory=OffsetLedger)
    serving_version: str | None = None
    serving_sha256: str | None = None
    """The digest this trainer announced for `serving_version`: what a resume checks."""
    batches: int = 0
    metrics: dict[str, float] = field(default_factory=dict)


class CheckpointFolder:
    """One checkpoint folder under `root`, written whole or not at all: the crash-safe write,
    recovery and digest check every offset-tied checkpoint of the trainer shares (the session
    model's, `CheckpointStore`, and the ranker's, online_trainer.ranker_training)."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = root
        self.current = root / name
        self.previous = root / f"{name}.old"
        self.rejected = root / f"{name}.rejected"
        self._staging = root / f"{name}.tmp"
        self._recover()

    def exists(self) -> bool:
        return (self.current / _STATE).exists()

    def _recover(self) -> None:
        """A kill between the two renames of `write` leaves only the previous checkpoint, under
        its old name: put it back in place before anything else touches the folder (the next
        write would otherwise delete it before its own checkpoint is in place)."""
        if not self.exists() and (self.previous / _STATE).exists():
            shutil.rmtree(self.current, ignore_errors=True)
            self.previous.rename(self.current)
            logger.warning("checkpoint recovered from its previous copy folder=%s", self.current)

    def write(
        self, tensors: dict[str, torch.Tensor], optimizer: dict[str, Any], state: dict[str, Any]
    ) -> None:
        """Tensors, optimizer state and a JSON-able state, replacing the checkpoint in one go."""
        staging = self._staging
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(staging / _WEIGHTS))
        torch.save(optimizer, staging / _OPTIMIZER)
        digests = {name: _file_digest(staging / name) for name in _DIGESTED}
        (staging / _STATE).write_text(json.dumps({"digests": digests, **state}))
        shutil.rmtree(self.previous, ignore_errors=True)
        if self.current.exists():
            self.current.rename(self.previous)
        staging.rename(self.current)
        shutil.rmtree(self.previous, ignore_errors=True)

    def read(self) -> tuple[dict[str, torch.Tensor], dict[str, Any], dict[str, Any]]:
        """What `write` wrote; IntegrityError when a file's bytes differ from their digest."""
        folder = self.current
        raw: dict[str, Any] = json.loads((folder / _STATE).read_text())
        digests = raw.get("digests", {})
        for name in _DIGESTED:
            if _file_digest(folder / name) != digests.get(name):
                raise IntegrityError(f"checkpoint {name} differs from its recorded digest")
        # On the CPU: the optimizer's load_state_dict moves each state to its parameter's
        # device, so a checkpoint written on a GPU host resumes on a CPU-only one.
        optimizer = torch.load(folder / _OPTIMIZER, map_location="cpu", weights_only=True)
        return load_file(str(folder / _WEIGHTS)), optimizer, raw

    def set_aside(self) -> None:
        """Moves a checkpoint that failed its check out of the way (kept for inspection, the
        one before it replaced): the trainer then starts as without a checkpoint."""
        shutil.rmtree(self.rejected, ignore_errors=True)
        self.current.rename(self.rejected)
        logger.warning("checkpoint set aside folder=%s", self.rejected)


class CheckpointStore(CheckpointFolder):
    """The session model's checkpoint: weights, optimizer, ids, histories and TrainerState."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, "checkpoint")

    def save(
        self,
        tensors: dict[str, torch.Tensor],
        optimizer: dict[str, Any],
        items: IdVocabulary,
        histories: UserHistories,
        state: TrainerState,
    ) -> None:
        users, arrays = histories.to_arrays()
        self.write(
            {**tensors, **{_HISTORIES + k: torch.from_numpy(v) for k, v in arrays.items()}},
            optimizer,
            {
                "offsets": {str(p): o for p, o in state.offsets.items()},
                "ledger": state.ledger.to_state(),
                "serving_version": state.serving_version,
                "serving_sha256": state.serving_sha256,
                "batches": state.batches,
                "metrics": state.metrics,
                "items": items.mapping(),
                "item_sightings": items.sightings(),
                "histories": {
                    "order": users,
                    "row_generations": {str(r): g for r, g in histories.row_generations().items()},
                },
            },
        )

    def load(
        self, max_len: int, max_users: int, limits: VocabularyLimits | None = None
    ) -> tuple[dict[str, torch.Tensor], dict[str, Any], IdVocabulary, UserHistories, TrainerState]:
        stored, optimizer, raw = self.read()
        tensors = {k: v for k, v in stored.items() if not k.startswith(_HISTORIES)}
        state = TrainerState(
            offsets={int(p): int(o) for p, o in raw["offsets"].items()},
            ledger=OffsetLedger.from_state(raw["ledger"]),
            serving_version=raw["serving_version"],
            serving_sha256=raw.get("serving_sha256"),
            batches=raw["batches"],
            metrics=raw["metrics"],
        )
        return (
            tensors,
            optimizer,
            IdVocabulary(raw["items"], limits, raw.get("item_sightings")),
            _histories(raw["histories"], stored, max_len, max_users),
            state,
        )


def _histories(
    raw: dict[str, Any], stored: dict[str, torch.Tensor], max_len: int, max_users: int
) -> UserHistories:
    if "order" not in raw:  # written before histories were stored as tensors
        return UserHistories.from_state(raw, max_len, max_users)
    arrays = {
        k.removeprefix(_HISTORIES): v.numpy() for k, v in stored.items() if k.startswith(_HISTORIES)
    }
    generations = {int(r): int(g) for r, g in raw["row_generations"].items()}
    return UserHistories.from_arrays(raw["order"], arrays, generations, max_len, max_users)


_DIGESTED = (_WEIGHTS, _OPTIMIZER)


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
