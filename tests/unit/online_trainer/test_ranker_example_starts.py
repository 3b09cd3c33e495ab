"""Where the ranker's consumer starts: the beginning on a first assignment without a checkpoint,
the checkpoint's next offset after a restart, where it stopped on a re-assignment (an eager
rebalance after a broker outage must not replay every example)."""

from __future__ import annotations

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from online_trainer.ledger import OffsetLedger
from online_trainer.service import ReadsEveryExampleOnce


class _Consumer:
    """Records assignments and answers local positions, as confluent-kafka's Consumer does."""

    def __init__(self, positions: dict[int, int]) -> None:
        self.positions = positions
        self.assigned: list[tuple[int, int]] = []

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned = [(tp.partition, tp.offset) for tp in partitions]

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition(tp.topic, tp.partition, self.positions.get(tp.partition, -1001))
            for tp in partitions
        ]


def _partitions(*numbers: int) -> list[TopicPartition]:
    return [TopicPartition("ranker.examples", n) for n in numbers]


def test_a_first_assignment_reads_from_the_beginning() -> None:
    consumer = _Consumer({})
    ReadsEveryExampleOnce(OffsetLedger()).on_assign(consumer, _partitions(0, 1))  # type: ignore[arg-type]
    assert consumer.assigned == [(0, OFFSET_BEGINNING), (1, OFFSET_BEGINNING)]


def test_a_reassignment_goes_on_where_this_process_stopped() -> None:
    starts = ReadsEveryExampleOnce(OffsetLedger())
    consumer = _Consumer({0: 42})  # partition 1 was assigned but never fetched
    starts.on_assign(consumer, _partitions(0, 1))  # type: ignore[arg-type]
    starts.on_revoke(consumer, _partitions(0, 1))  # type: ignore[arg-type]
    starts.on_assign(consumer, _partitions(0, 1, 2))  # type: ignore[arg-type]
    assert consumer.assigned == [(0, 42), (1, OFFSET_BEGINNING), (2, OFFSET_BEGINNING)]


def test_a_restart_goes_on_at_the_checkpointed_offsets() -> None:
    ledger = OffsetLedger()
    ledger.record(0, 0, 99)
    consumer = _Consumer({})
    ReadsEveryExampleOnce(ledger).on_assign(consumer, _partitions(0, 1))  # type: ignore[arg-type]
    assert consumer.assigned == [(0, 100), (1, OFFSET_BEGINNING)]


def test_a_reassignment_after_a_restart_prefers_where_this_process_stopped() -> None:
    ledger = OffsetLedger()
    ledger.record(0, 0, 99)
    starts = ReadsEveryExampleOnce(ledger)
    consumer = _Consumer({0: 130})
    starts.on_assign(consumer, _partitions(0))  # type: ignore[arg-type]
    starts.on_revoke(consumer, _partitions(0))  # type: ignore[arg-type]
    starts.on_assign(consumer, _partitions(0))  # type: ignore[arg-type]
    assert consumer.assigned == [(0, 130)]
