"""The session checkpoint format: full and delta versions reload to the model that was stored."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from models.ranker import DLRMConfig, DLRMRanker
from models.sequence_training import SessionTrainer
from models.sequences import Queries
from models.session_checkpoint import (
    changed_rows,
    delta_parts,
    load_session_model,
    save_session_model,
    session_manifest,
    session_tensors,
)
from models.session_config import SessionTransformerConfig
from models.store import ModelStore

CONFIG = SessionTransformerConfig(dim=16, heads=2, layers=1, max_len=8, dropout=0.0)
SEQS = [np.array([1, 2, 3, 4]), np.array([2, 3, 4, 5])]
TIMES = [np.arange(4) * 60, np.arange(4) * 60]
IDS = {f"i{k}": k for k in range(1, 6)}


def _queries() -> Queries:
    return Queries([np.array([1, 2, 3]), np.array([4])], [np.array([0, 1, 2]), np.array([0])],
                   np.array([10, 10]), np.array([4, 5]))


def _scores(trainer: SessionTrainer) -> np.ndarray:
    return np.asarray(trainer.score(_queries()))


def test_a_delta_version_reloads_to_the_trained_model(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    trainer = SessionTrainer(5, CONFIG, torch.device("cpu"))
    before = session_tensors(trainer.model)
    store.save_full("m", before, session_manifest("m", "1.0", CONFIG, IDS))
    trainer.partial_fit(SEQS, TIMES)
    trainer.grow_items(7)  # two ids admitted live
    after = session_tensors(trainer.model)

    rows = changed_rows(after, before)
    assert rows is not None and {5, 6, 7} <= set(rows.tolist())
    updates, dense = delta_parts(after, rows)
    store.save_delta("m", "1.0", updates, dense, session_manifest("m", "1.1", CONFIG, IDS))

    loaded = load_session_model(store, "m", "1.1", store.digest("m", "1.1"))
    assert loaded.manifest.kind == "delta" and loaded.manifest.parent == "1.0"
    assert loaded.model.n_items == 7 and loaded.ranker is None
    restored = SessionTrainer(7, CONFIG, torch.device("cpu"))
    restored.model.load_state_dict(loaded.model.state_dict())
    assert np.allclose(_scores(restored), _scores(trainer), atol=1e-6)


def test_unchanged_rows_are_left_out_of_a_delta() -> None:
    trainer = SessionTrainer(5, CONFIG, torch.device("cpu"))
    before = session_tensors(trainer.model)
    after = {k: v.clone() for k, v in before.items()}
    after["item_embedding.weight"][3] += 1.0
    rows = changed_rows(after, before)
    assert rows is not None and rows.tolist() == [3]
    del before["item_bias"]
    assert changed_rows(after, before) is None  # a parent without row tensors: full only


def test_a_stored_ranker_and_the_served_id_map_round_trip(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    trainer = SessionTrainer(6, CONFIG, torch.device("cpu"))
    ranker = DLRMRanker(DLRMConfig(n_dense=4, n_sparse=2, dim=CONFIG.dim))
    save_session_model(store, "m", "1.0", trainer.model, ["a", "b", "c"], ranker)

    loaded = load_session_model(store, "m", "1.0", store.digest("m", "1.0"))
    assert loaded.item_rows == {"a": 1, "b": 2, "c": 3}  # rows 4..6 have no id yet
    assert loaded.ranker is not None and loaded.ranker.config == ranker.config
    for key, value in ranker.state_dict().items():
        assert torch.equal(loaded.ranker.state_dict()[key], value)
