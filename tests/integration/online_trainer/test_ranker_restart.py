"""A restarted trainer goes on with the ranker it had, on the real broker: the same weights and
published versions, the ranker.examples offsets where it stopped, nothing announced twice, a
version checkpointed but never announced announced once, a rollback kept."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from models.store import ModelStore
from online_trainer.checkpoint import CheckpointFolder
from online_trainer.ranker_training import RankerTraining
from online_trainer.service import TrainerService
from schemas import ModelUpdate, decode
from schemas.ranker_examples import RankerExample
from schemas.topics import MODEL_UPDATES, RANKER_EXAMPLES
from streams.kafka.connection import KafkaConnection
from streams.kafka.producer import EventProducer
from tests.integration.kafka_helpers import read_all
from tests.integration.online_trainer.conftest import train_settings
from tests.integration.online_trainer.test_trainer_service import Running
from tests.unit.online_trainer.helpers import ranker_examples, train_ranker


def _send(kafka: KafkaConnection, examples: list[RankerExample]) -> None:
    producer = EventProducer(kafka)
    for example in examples:
        producer.send(kafka.topic(RANKER_EXAMPLES), example.user_id, example)
    producer.flush()


def _until(condition: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _trained(service: TrainerService) -> int:
    return service.ranker.ledger.trained_count()


def _ranker_records(kafka: KafkaConnection, at_least: int) -> list[str]:
    records = [decode(ModelUpdate, m.value())
               for m in read_all(kafka, kafka.topic(MODEL_UPDATES), at_least)]
    return [f"{u.version}:{u.stage}" for u in records if u.model_name == "ranker"]


def test_a_restarted_trainer_goes_on_with_the_ranker_it_had(
    kafka: KafkaConnection, tmp_path: Path
) -> None:
    settings = train_settings(
        kafka, tmp_path, ranker_group_id=f"ranker-{kafka.topic_prefix}", batch_size=100,
        ranker_gate_every=2, ranker_held_back=100, ranker_min_lists=50,
    )
    _send(kafka, ranker_examples(600, seed=0))
    running = Running(settings)
    try:
        _until(lambda: _trained(running.service) == 600, "600 examples trained")
    finally:
        running.close()
    before = running.service.ranker
    assert before.published, "the gate promoted a ranker before the stop"
    announced = _ranker_records(kafka, len(before.published))

    restarted = Running(settings)
    try:
        after = restarted.service.ranker
        weights = before.ranker.tensors()
        assert all(torch.equal(v, weights[k]) for k, v in after.ranker.tensors().items())
        assert after.published == before.published
        _send(kafka, ranker_examples(200, seed=1))
        _until(lambda: _trained(restarted.service) == 800, "the next 200 examples trained")
    finally:
        restarted.close()
    assert after.ledger.overlaps == 0 and after.ledger.gaps == 0  # none twice, none skipped
    assert after.ranker.lists_trained > before.ranker.lists_trained
    records = _ranker_records(kafka, len(after.published))
    assert records[: len(announced)] == announced  # announced once, never again
    assert len(records) == len(set(records)) == len(after.published)


@pytest.mark.parametrize("on_the_log", ["nothing", "rolled_back"])
def test_a_restart_announces_a_checkpointed_ranker_the_log_lacks_and_keeps_a_rollback(
    kafka: KafkaConnection, tmp_path: Path, on_the_log: str
) -> None:
    settings = train_settings(kafka, tmp_path, ranker_group_id=f"ranker-{kafka.topic_prefix}")
    killed = RankerTraining(
        ModelStore(settings.store_dir), held_back=100, gate_every=2, min_lists=50,
        checkpoints=CheckpointFolder(settings.state_dir, "ranker"),
    )
    train_ranker(killed, ranker_examples(600, seed=0))
    killed.checkpoint()  # killed before the announcement
    newest = killed.published[-1]
    expected = [f"{newest.version}:serving"]
    if on_the_log == "rolled_back":  # announced, then rolled back by the scorers
        expected.append(f"{newest.version}:rolled_back")
        producer = EventProducer(kafka)
        for stage in ("serving", "rolled_back"):
            update = newest.model_copy(update={"stage": stage})
            producer.send(kafka.topic(MODEL_UPDATES), update.log_key, update)
        producer.flush()
    running = Running(settings)
    try:
        _until(lambda: running.service.ranker_announced, "model.updates read to its end")
    finally:
        running.close()
    assert _ranker_records(kafka, len(expected)) == expected
