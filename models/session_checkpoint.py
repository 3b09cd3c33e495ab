"""Publishing and loading session Transformer versions through the :class:`ModelStore`.

:class:`SessionPublisher` is what the online trainer calls after a validation gate:
``publish(trainer, metrics=..., window=..., item_ids=..., full=False)`` writes a delta (rows
of the item table and bias that changed since the last publication, plus every dense weight)
or a full checkpoint (a new major version). :func:`load_trainer` rebuilds a
:class:`SessionTrainer` (config and item id map from the manifest) for the trainer or the
scorer; :func:`index_payload` gives the scorer the ids and MIPS vectors for its ANN index.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

from models.retrieval import mips_item_vectors
from models.sequence_training import SessionTrainer
from models.session_config import SessionTransformerConfig
from models.store import Manifest, ModelStore

ROW_TENSORS = ("item_embedding.weight", "item_bias")
ITEM_FEATURE = "item"


class SessionPublisher:
    """Writes full and delta versions of one model name; remembers the last publication."""

    def __init__(self, store: ModelStore, name: str = "session_transformer") -> None:
        self.store = store
        self.name = name
        self._last: dict[str, torch.Tensor] | None = None
        self._last_version: str | None = None

    def publish(
        self,
        trainer: SessionTrainer,
        *,
        metrics: dict[str, float],
        window: dict[str, int],
        item_ids: dict[str, int],
        full: bool = False,
    ) -> str:
        """Stores a new version and returns it (``major.minor``)."""
        tensors = {k: v.detach().cpu().clone() for k, v in trainer.model.state_dict().items()}
        full = full or self._last is None or self._last_version is None
        version = str(self.store.next_version(self.name, major=full))
        manifest = Manifest(
            name=self.name, version=version, kind="full" if full else "delta",
            metrics=metrics, training_window=window, id_maps={ITEM_FEATURE: item_ids},
            config=trainer.config.model_dump(),
        )
        if full:
            self.store.save_full(self.name, tensors, manifest)
        else:
            assert self._last is not None and self._last_version is not None  # checked above
            changed = {key: _changed_rows(self._last[key], tensors[key]) for key in ROW_TENSORS}
            dense = {k: v for k, v in tensors.items() if k not in ROW_TENSORS}
            self.store.save_delta(self.name, self._last_version, changed, dense, manifest)
        self._last, self._last_version = tensors, version
        return version


def _changed_rows(
    before: torch.Tensor, after: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices and values of rows that differ (rows added by growth always count)."""
    common = min(len(before), len(after))
    diff = (before[:common] != after[:common])
    differs = diff.reshape(common, -1).any(dim=1) if diff.dim() > 1 else diff
    rows = torch.cat([torch.nonzero(differs).flatten(), torch.arange(common, len(after))])
    return rows, after[rows]


def load_trainer(
    store: ModelStore, name: str = "session_transformer", version: str | None = None,
    device: torch.device | None = None,
) -> tuple[SessionTrainer, Manifest]:
    """A trainer holding the stored weights (fresh optimizer state), and its manifest."""
    tensors, manifest = store.load(name, version)
    config = SessionTransformerConfig.model_validate(manifest.config)
    n_items = int(tensors["item_embedding.weight"].shape[0]) - 1
    trainer = SessionTrainer(n_items, config, device)
    trainer.model.load_state_dict(tensors)
    return trainer, manifest


def index_payload(
    trainer: SessionTrainer,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Item ids ``1..n`` and their MIPS vectors (bias folded in) for the ANN index."""
    table = trainer.model.item_vectors().detach().float().cpu().numpy()[1:]
    bias = trainer.model.item_bias.detach().float().cpu().numpy()[1:]
    ids = np.arange(1, len(table) + 1, dtype=np.int64)
    return ids, mips_item_vectors(table, bias)
