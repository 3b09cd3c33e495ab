"""The ranker's training state survives a restart: a restored ranker goes on exactly as the
one that was never stopped, at the same offsets, and a checkpoint it cannot trust is set aside."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from models.logged_ranker import LoggedRankerConfig
from models.store import ModelStore
from online_trainer.checkpoint import CheckpointFolder
from online_trainer.ranker_training import RankerTraining
from schemas.model_log import ModelLog
from schemas.ranker_examples import RankerExample
from streams.kafka.contract_loop import Envelope
from streams.kafka.deadletter import SourcePosition
from tests.unit.online_trainer.helpers import T0, ranker_examples


def _training(root: Path, **changes: object) -> RankerTraining:
    return RankerTraining(
        ModelStore(root / "store"), held_back=100, gate_every=2, min_lists=50,
        checkpoints=CheckpointFolder(root / "state", "ranker"), **changes,  # type: ignore[arg-type]
    )


def _batches(
    examples: list[RankerExample], first: int = 0
) -> list[list[Envelope[RankerExample]]]:
    """Micro-batches of 50 envelopes from partition 0, offsets counted from `first`."""
    envelopes = [
        Envelope(e, b"k", SourcePosition("ranker.examples", 0, first + i, None), b"")
        for i, e in enumerate(examples)
    ]
    return [envelopes[lo : lo + 50] for lo in range(0, len(envelopes), 50)]


def _feed(training: RankerTraining, batches: list[list[Envelope[RankerExample]]]) -> None:
    for batch in batches:
        training.train(batch, now=T0)


def _same_tensors(a: RankerTraining, b: RankerTraining) -> bool:
    left, right = a.ranker.tensors(), b.ranker.tensors()
    return left.keys() == right.keys() and all(torch.equal(left[k], right[k]) for k in left)


def test_a_restored_ranker_goes_on_as_the_one_never_stopped(tmp_path: Path) -> None:
    first = _batches(ranker_examples(600, seed=0))
    later = _batches(ranker_examples(600, seed=1), first=600)
    kept = _training(tmp_path / "kept")
    stopped = _training(tmp_path / "stopped")
    _feed(kept, first)
    _feed(stopped, first)
    assert stopped.published, "the gate promoted before the stop"
    stopped.checkpoint()
    restarted = _training(tmp_path / "stopped")
    assert _same_tensors(restarted, stopped)
    assert restarted.published == stopped.published
    assert restarted.ledger.next_offset(0) == 600 and restarted.unsaved_batches == 0
    _feed(kept, later)
    _feed(restarted, later)
    assert _same_tensors(restarted, kept)  # optimizer moments, scales, held-back lists, cadence
    assert [d.promote for d in restarted.decisions] == [d.promote for d in kept.decisions[-6:]]
    assert [u.version for u in restarted.published] == [u.version for u in kept.published]
    assert restarted.ledger.trained_count() == 1200 and restarted.ledger.overlaps == 0


def test_examples_redelivered_after_a_restart_are_not_trained_again(tmp_path: Path) -> None:
    batches = _batches(ranker_examples(200, seed=0))
    training = _training(tmp_path)
    _feed(training, batches)
    training.checkpoint()
    restarted = _training(tmp_path)
    before = restarted.ranker.tensors()
    assert all(restarted.train(batch, now=T0) is None for batch in batches)
    assert all(torch.equal(before[k], v) for k, v in restarted.ranker.tensors().items())
    assert restarted.ledger.trained_count() == 200 and restarted.ledger.overlaps == 0


def test_a_damaged_checkpoint_is_set_aside_counted_and_the_ranker_starts_afresh(
    tmp_path: Path,
) -> None:
    training = _training(tmp_path)
    _feed(training, _batches(ranker_examples(200, seed=0)))
    training.checkpoint()
    weights = tmp_path / "state" / "ranker" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)
    rejected: list[tuple[str, str]] = []
    restarted = _training(
        tmp_path, on_rejected=lambda what, e: rejected.append((what, type(e).__name__))
    )
    assert rejected == [("ranker_checkpoint", "IntegrityError")]
    assert (tmp_path / "state" / "ranker.rejected").exists()
    assert restarted.ledger.next_offset(0) is None and restarted.ranker.lists_trained == 0
    vectors = ranker_examples(1, seed=9)[0].matrix()
    np.testing.assert_array_equal(restarted.ranker.score(vectors), vectors[:, 0])  # untrained


def test_a_checkpoint_of_another_ranker_configuration_is_set_aside(tmp_path: Path) -> None:
    training = _training(tmp_path)
    _feed(training, _batches(ranker_examples(200, seed=0)))
    training.checkpoint()
    rejected: list[str] = []
    wider = LoggedRankerConfig(bottom_mlp=(64,))
    restarted = _training(tmp_path, config=wider, on_rejected=lambda _w, e: rejected.append(str(e)))
    assert len(rejected) == 1 and "another ranker" in rejected[0]
    assert restarted.ledger.next_offset(0) is None and restarted.ranker.config == wider


def test_a_checkpointed_publication_is_announced_only_when_the_log_has_no_record_of_it(
    tmp_path: Path,
) -> None:
    training = _training(tmp_path)
    _feed(training, _batches(ranker_examples(600, seed=0)))
    newest = training.published[-1]
    log = ModelLog()
    assert training.unannounced(log) == newest  # killed between checkpoint and announcement
    log.apply(newest)
    assert training.unannounced(log) is None  # the scorers serve it already
    log.apply(newest.model_copy(update={"stage": "rolled_back"}))
    assert training.unannounced(log) is None  # a rollback is not undone


def test_the_checkpoint_keeps_as_many_publications_as_the_log_keeps_serving(
    tmp_path: Path,
) -> None:
    training = _training(tmp_path)
    _feed(training, _batches(ranker_examples(600, seed=0)))
    newest = training.published[-1]
    training.published = [
        newest.model_copy(update={"version": f"1.{minor}"}) for minor in range(20)
    ]
    training.checkpoint()
    restored = _training(tmp_path).published
    assert [u.version for u in restored] == [f"1.{minor}" for minor in range(11, 20)]
