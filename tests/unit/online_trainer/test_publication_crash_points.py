"""A trainer killed at any step of a publication — artifact, manifest, announcement — restarts
without announcing anything blank or partial: every announced version loads, with the digest
the announcement carries, and is the model that was trained."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import models.store
from models.store import ModelStore
from online_trainer.publisher import Publisher
from online_trainer.trainer import OnlineTrainer
from schemas import ModelUpdate
from streams.kafka.connection import KafkaConnection
from tests.unit.online_trainer.helpers import envelopes, settings


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs."""


class Announcements:
    def __init__(self, kill: bool = False) -> None:
        self.kill = kill
        self.records: list[ModelUpdate] = []

    def send(self, topic: str, key: str, record: ModelUpdate) -> None:
        if self.kill:
            raise Killed("before the announcement")
        self.records.append(record)

    def flush(self, timeout_s: float | None = None) -> None:
        return None


def _trainer(tmp: Path, sink: Announcements) -> OnlineTrainer:
    s = settings(tmp)
    publisher = Publisher(ModelStore(s.store_dir), sink, KafkaConnection(), s.model_name, 0.5)  # type: ignore[arg-type]
    return OnlineTrainer(s, s.model, publisher)


def _assert_announced_versions_are_whole(tmp: Path, records: list[ModelUpdate]) -> None:
    store = ModelStore(tmp / "store")
    for record in records:
        tensors, manifest = store.load(record.model_name, record.version, record.sha256)
        assert manifest.id_maps["item"], f"{record.version} announced without its items"
        assert all(bool(torch.isfinite(t).all()) for t in tensors.values() if t.is_floating_point())


@pytest.mark.parametrize("step", ["weights", "manifest", "announcement"])
def test_a_kill_at_any_step_of_a_publication_announces_nothing_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    stream = envelopes(1200)
    first = Announcements()
    trainer = _trainer(tmp_path, first)
    trainer.train_batch(stream[:600])
    trainer.publish(None, major=True)  # 1.0 serves; a publication is also a checkpoint
    trainer.train_batch(stream[600:900])

    with monkeypatch.context() as kill:
        if step == "weights":
            kill.setattr(models.store, "save_file", _raise_killed)
        elif step == "manifest":
            kill.setattr(models.store.Manifest, "model_dump_json", _raise_killed)
        first.kill = step == "announcement"
        with pytest.raises(Killed):
            trainer.publish(None, major=False)

    second = Announcements()
    restarted = _trainer(tmp_path, second)  # from the checkpoint of 1.0
    assert restarted.state.serving_version == "1.0"
    restarted.train_batch(stream[600:900])
    restarted.publish(None, major=False)
    announced = [r.version for r in (*first.records, *second.records)]
    assert announced[0] == "1.0" and len(set(announced)) == len(announced)
    _assert_announced_versions_are_whole(tmp_path, [*first.records, *second.records])
    stored = [str(v) for v in ModelStore(tmp_path / "store").versions("session_transformer")]
    assert second.records[-1].version == stored[-1]  # a number is never reused


def _raise_killed(*_args: object, **_kwargs: object) -> None:
    raise Killed("mid-write")
