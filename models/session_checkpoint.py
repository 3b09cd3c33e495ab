"""The session model's checkpoint format: what the trainer writes to the :class:`ModelStore` and
the scorer reads back. This module is its only definition.

- tensors: the :class:`SessionTransformer` state dict; when a ranker is stored, the
  :class:`DLRMRanker` state dict under ``ranker.``;
- ``manifest.config``: :class:`SessionTransformerConfig` fields, plus ``ranker``: the
  :class:`DLRMConfig` fields when a ranker is stored;
- ``manifest.id_maps["item"]``: raw item id -> table row (``1..n``; row 0 is padding). The
  trainer grows its table ahead of its vocabulary, so rows no id names may exist; they are never
  served;
- a delta version stores, for :data:`ROW_TENSORS`, only the rows that changed since its parent
  (rows added count as changed) and every other tensor in full (dense weights are small).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from models.ranker import DLRMConfig, DLRMRanker
from models.session_config import SessionTransformerConfig
from models.session_transformer import SessionTransformer
from models.store import Manifest, ModelStore

ROW_TENSORS = ("item_embedding.weight", "item_bias")
ITEM_MAP = "item"
RANKER_PREFIX = "ranker."
RANKER_CONFIG = "ranker"

RowUpdate = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class SessionCheckpoint:
    """A loaded version: the encoder, its ranker when one was stored, and the served id map."""

    model: SessionTransformer
    ranker: DLRMRanker | None
    item_rows: dict[str, int]
    """raw item id -> row, restricted to rows the table holds."""
    manifest: Manifest


def session_manifest(
    name: str,
    version: str,
    config: SessionTransformerConfig,
    item_rows: dict[str, int],
    *,
    metrics: dict[str, float] | None = None,
    window: dict[str, int] | None = None,
    ranker: DLRMConfig | None = None,
) -> Manifest:
    """The manifest of a full version (the store turns it into a delta's when asked to)."""
    stored_config = config.model_dump()
    if ranker is not None:
        stored_config[RANKER_CONFIG] = ranker.model_dump()
    return Manifest(
        name=name,
        version=version,
        kind="full",
        metrics=dict(metrics or {}),
        training_window=dict(window or {}),
        id_maps={ITEM_MAP: dict(item_rows)},
        config=stored_config,
    )


def session_tensors(
    model: SessionTransformer, ranker: DLRMRanker | None = None
) -> dict[str, torch.Tensor]:
    tensors = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if ranker is not None:
        ranker_state = ranker.state_dict().items()
        tensors.update({RANKER_PREFIX + k: v.detach().clone() for k, v in ranker_state})
    return tensors


def save_session_model(
    store: ModelStore,
    name: str,
    version: str,
    model: SessionTransformer,
    item_ids: Sequence[str],
    ranker: DLRMRanker | None = None,
) -> Path:
    """Stores a full version; ``item_ids[i]`` names row ``i + 1``."""
    rows = {item_id: i + 1 for i, item_id in enumerate(item_ids)}
    manifest = session_manifest(
        name, version, model.config, rows, ranker=ranker.config if ranker else None
    )
    return store.save_full(name, session_tensors(model, ranker), manifest)


def load_session_model(
    store: ModelStore, name: str, version: str, sha256: str
) -> SessionCheckpoint:
    """Rebuilds the stored modules of the version whose digest is `sha256` (delta chains
    resolved, and digests checked, by the store)."""
    tensors, manifest = store.load(name, version, sha256)
    known = set(SessionTransformerConfig.model_fields)
    config = SessionTransformerConfig(**{k: v for k, v in manifest.config.items() if k in known})
    state = {k: v for k, v in tensors.items() if not k.startswith(RANKER_PREFIX)}
    model = SessionTransformer(state[ROW_TENSORS[0]].shape[0] - 1, config)
    model.load_state_dict(state)
    item_map = manifest.id_maps.get(ITEM_MAP, {})
    rows = {i: row for i, row in item_map.items() if 0 < row <= model.n_items}
    return SessionCheckpoint(model, _ranker(tensors, manifest), rows, manifest)


def _ranker(tensors: dict[str, torch.Tensor], manifest: Manifest) -> DLRMRanker | None:
    raw = manifest.config.get(RANKER_CONFIG)
    if not isinstance(raw, dict):
        return None
    ranker = DLRMRanker(DLRMConfig(**raw))
    ranker.load_state_dict(
        {k[len(RANKER_PREFIX) :]: v for k, v in tensors.items() if k.startswith(RANKER_PREFIX)}
    )
    return ranker


def changed_rows(
    tensors: dict[str, torch.Tensor], parent: dict[str, torch.Tensor]
) -> torch.Tensor | None:
    """Rows where any row tensor differs from the parent (rows added count as changed); ``None``
    when the parent's row tensors are missing or shaped differently (only a full version fits)."""
    changed = None
    for name in ROW_TENSORS:
        new, old = tensors[name], parent.get(name)
        if old is None or old.shape[1:] != new.shape[1:]:
            return None
        common = min(len(old), len(new))
        diff = (new[:common] != old[:common]).reshape(common, -1).any(dim=1)
        mask = torch.cat([diff, torch.ones(len(new) - common, dtype=torch.bool)])
        changed = mask if changed is None else changed | mask
    return None if changed is None else changed.nonzero().flatten()


def delta_parts(
    tensors: dict[str, torch.Tensor], rows: torch.Tensor
) -> tuple[dict[str, RowUpdate], dict[str, torch.Tensor]]:
    """What :meth:`ModelStore.save_delta` stores: the given rows of each row tensor, and every
    other tensor whole. Each row tensor gets its own copy of the indices: safetensors refuses
    to store two names over one buffer."""
    updates = {name: (rows.clone(), tensors[name][rows]) for name in ROW_TENSORS}
    dense = {k: v for k, v in tensors.items() if k not in ROW_TENSORS}
    return updates, dense


def row_count(tensors: dict[str, torch.Tensor]) -> int:
    return int(tensors[ROW_TENSORS[0]].shape[0])
