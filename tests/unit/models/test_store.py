"""Model store: versioned full and delta checkpoints round-trip exactly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from models.sequence_training import SessionTrainer
from models.sequences import Queries
from models.session_config import SessionTransformerConfig
from models.store import IntegrityError, Manifest, ModelStore, OutsideStore


def _manifest(version: str) -> Manifest:
    return Manifest(
        name="m", version=version, kind="full", metrics={"ndcg@10": 0.1},
        training_window={"start": 0, "end": 10}, id_maps={"item": {"a": 1, "b": 2}},
    )


def test_full_checkpoint_round_trip_reproduces_scores(tmp_path: Path) -> None:
    config = SessionTransformerConfig(dim=16, heads=2, layers=1, max_len=8, dropout=0.0)
    trainer = SessionTrainer(7, config, torch.device("cpu"))
    trainer.partial_fit([np.arange(1, 8)], [np.arange(7) * 60])
    store = ModelStore(tmp_path)
    version = store.next_version("session", major=True)
    store.save_full("session", trainer.model.state_dict(), _manifest(str(version)))

    tensors, manifest = store.load("session", "1.0", store.digest("session", "1.0"))
    restored = SessionTrainer(7, config.model_copy(update={"seed": 99}), torch.device("cpu"))
    restored.model.load_state_dict(tensors)
    queries = Queries([np.array([1, 2, 3])], [np.array([0, 60, 120])], np.array([180]),
                      np.array([4]))
    assert np.array_equal(trainer.score(queries), restored.score(queries))
    assert manifest.version == "1.0"
    assert manifest.id_maps == {"item": {"a": 1, "b": 2}}
    assert manifest.training_window == {"start": 0, "end": 10}


def test_delta_applies_changed_rows_on_top_of_its_parent(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    table = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    store.save_full("m", {"table": table, "dense": torch.ones(2)}, _manifest("1.0"))
    rows = torch.tensor([1, 5])  # row 5 is new: the table grew
    values = torch.full((2, 3), -1.0)
    store.save_delta("m", "1.0", {"table": (rows, values)}, {"dense": torch.zeros(2)},
                     _manifest(str(store.next_version("m", major=False))))

    tensors, manifest = store.load("m", "1.1", store.digest("m", "1.1"))
    assert manifest.kind == "delta" and manifest.parent == "1.0" and manifest.version == "1.1"
    assert tensors["table"].shape == (6, 3)
    assert torch.equal(tensors["table"][1], values[0])
    assert torch.equal(tensors["table"][0], table[0])
    assert torch.equal(tensors["table"][4], torch.zeros(3))
    assert torch.equal(tensors["dense"], torch.zeros(2))
    old, _ = store.load("m", "1.0", store.digest("m", "1.0"))
    assert torch.equal(old["table"], table)


def test_versions_are_ordered_and_never_overwritten(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    for version in ("1.0", "1.1", "2.0", "1.10"):
        store.save_full("m", {"w": torch.zeros(1)}, _manifest(version))
    assert [str(v) for v in store.versions("m")] == ["1.0", "1.1", "1.10", "2.0"]
    assert str(store.next_version("m", major=False)) == "2.1"
    assert str(store.next_version("m", major=True)) == "3.0"
    with pytest.raises(FileExistsError):
        store.save_full("m", {"w": torch.zeros(1)}, _manifest("2.0"))


def test_a_version_whose_bytes_changed_is_refused_by_its_digest(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    store.save_full("m", {"table": torch.ones(3, 2)}, _manifest("1.0"))
    digest = store.digest("m", "1.0")
    assert store.load("m", "1.0", sha256=digest)[1].version == "1.0"
    store.save_full("m", {"table": torch.zeros(3, 2)}, _manifest("2.0"))
    with pytest.raises(IntegrityError):
        store.load("m", "2.0", sha256=digest)  # another version's digest vouches for nothing
    manifest = tmp_path / "m" / "1.0" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"ndcg@10": 0.1', '"ndcg@10": 0.9'))
    with pytest.raises(IntegrityError):
        store.load("m", "1.0", sha256=digest)


def test_a_delta_vouches_for_its_parent(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    store.save_full("m", {"table": torch.ones(3, 2)}, _manifest("1.0"))
    store.save_delta("m", "1.0", {"table": (torch.tensor([0]), torch.zeros(1, 2))}, {},
                     _manifest("1.1"))
    digest = store.digest("m", "1.1")
    assert torch.equal(store.load("m", "1.1", sha256=digest)[0]["table"][0], torch.zeros(2))
    parent = tmp_path / "m" / "1.0" / "weights.safetensors"
    from safetensors.torch import save_file

    save_file({"table": torch.full((3, 2), 7.0)}, str(parent))  # the parent swapped under it
    with pytest.raises(IntegrityError):
        store.load("m", "1.1", sha256=digest)


def test_anything_else_in_a_models_folder_is_not_a_version(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    store.save_full("m", {"table": torch.ones(1)}, _manifest("1.0"))
    for stray in (".2.0.tmp", "latest", "9.9.9", "../x"):
        folder = tmp_path / "m" / stray
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "manifest.json").write_text("{}")
    (tmp_path / "m" / "notes.txt").write_text("")
    assert [str(v) for v in store.versions("m")] == ["1.0"]
    with pytest.raises(ValueError):
        store.load("m", "../x", "0" * 64)


def test_a_write_clears_what_an_interrupted_write_left(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    store.save_full("m", {"table": torch.ones(1)}, _manifest("1.0"))
    leftover = tmp_path / "m" / ".1.1.tmp"
    leftover.mkdir()
    (leftover / "weights.safetensors").write_bytes(b"half a file")
    store.save_full("m", {"table": torch.ones(1)}, _manifest("2.0"))
    assert not leftover.exists()
    assert [str(v) for v in store.versions("m")] == ["1.0", "2.0"]


def test_a_symlink_named_like_a_version_is_never_read_whatever_its_bytes(tmp_path: Path) -> None:
    elsewhere = ModelStore(tmp_path / "elsewhere")
    elsewhere.save_full("m", {"table": torch.ones(1)}, _manifest("7.0"))
    digest = elsewhere.digest("m", "7.0")
    store = ModelStore(tmp_path / "store")
    store.save_full("m", {"table": torch.ones(1)}, _manifest("1.0"))
    (tmp_path / "store" / "m" / "7.0").symlink_to(tmp_path / "elsewhere" / "m" / "7.0")
    assert [str(v) for v in store.versions("m")] == ["1.0"]
    with pytest.raises(OutsideStore):
        store.load("m", "7.0", digest)
    # A real folder whose files are links out of the store is refused the same way.
    linked = tmp_path / "store" / "m" / "8.0"
    linked.mkdir()
    for name in ("weights.safetensors", "manifest.json"):
        (linked / name).symlink_to(tmp_path / "elsewhere" / "m" / "7.0" / name)
    with pytest.raises(OutsideStore):
        store.load("m", "8.0", digest)
    assert [str(v) for v in store.versions("m")] == ["1.0"]


def test_a_model_folder_that_leads_out_of_the_store_is_refused(tmp_path: Path) -> None:
    elsewhere = ModelStore(tmp_path / "elsewhere")
    elsewhere.save_full("m", {"table": torch.ones(1)}, _manifest("1.0"))
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "m").symlink_to(tmp_path / "elsewhere" / "m")
    store = ModelStore(tmp_path / "store")
    with pytest.raises(OutsideStore):
        store.load("m", "1.0", elsewhere.digest("m", "1.0"))
    assert store.versions("m") == []


def test_empty_and_partial_version_folders_never_block_a_publication(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    store.save_full("m", {"table": torch.ones(1)}, _manifest("1.0"))
    (tmp_path / "m" / "1.1").mkdir()  # empty, named like the next version
    partial = tmp_path / "m" / "1.2"
    partial.mkdir()
    (partial / "weights.safetensors").write_bytes(b"half a file")  # no manifest
    (tmp_path / "m" / "1.3").symlink_to(tmp_path / "nowhere")  # dangling
    assert [str(v) for v in store.versions("m")] == ["1.0"]
    assert str(store.latest("m")) == "1.0"
    version = str(store.next_version("m", major=False))
    assert version == "1.4"
    store.save_full("m", {"table": torch.ones(1)}, _manifest(version))
    assert [str(v) for v in store.versions("m")] == ["1.0", "1.4"]
    assert str(store.next_version("m", major=True)) == "2.0"


def test_a_delta_without_its_parents_digest_is_refused(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    store.save_full("m", {"table": torch.ones(3, 2)}, _manifest("1.0"))
    store.save_delta("m", "1.0", {"table": (torch.tensor([0]), torch.zeros(1, 2))}, {},
                     _manifest("1.1"))
    manifest = tmp_path / "m" / "1.1" / "manifest.json"
    raw = json.loads(manifest.read_text())
    raw["parent_sha256"] = None
    manifest.write_text(json.dumps(raw))
    with pytest.raises(IntegrityError):
        store.load("m", "1.1", store.digest("m", "1.1"))
