"""A table reader's contract loop hands tombstones to its delete handler in stream order, and
dead-letters one the handler refuses; a loop without one dead-letters every tombstone."""

from __future__ import annotations

from typing import Any

from schemas import ContractError, DeadLetter, decode, encode
from schemas.catalog import CatalogItem
from schemas.topics import dead_letter_topic
from streams.kafka.contract_loop import ContractLoop, Envelope, RecordRejected, Tombstone
from streams.kafka.deadletter import DeadLetterWriter
from tests.hostile_corpus import Hostile
from tests.unit.streams.kafka.recording import RecordingConsumer, RecordingProducer, messages

TOPIC = "catalog.items"


def _record(item_id: str) -> Hostile:
    item = CatalogItem(item_id=item_id, genres=["Drama"], updated_at=1_700_000_000.0)
    return Hostile(f"record {item_id}", item_id.encode(), encode(item))


def _loop(
    batch: list[Hostile], seen: list[str], with_tombstones: bool
) -> tuple[ContractLoop[CatalogItem], RecordingConsumer, RecordingProducer]:
    consumer, producer = RecordingConsumer([messages(TOPIC, batch)]), RecordingProducer()

    def handler(envelopes: list[Envelope[CatalogItem]]) -> list[RecordRejected]:
        seen.extend(f"put {e.record.item_id}" for e in envelopes)
        return []

    def delete(tombstone: Tombstone) -> None:
        if tombstone.key == b"refused":
            raise RuntimeError("the table is gone")
        if tombstone.key == b"not an id":
            raise ContractError("InvalidKey", "not an item id")
        seen.append(f"delete {tombstone.key.decode()}")

    loop = ContractLoop(
        consumer, CatalogItem, handler, producer,  # type: ignore[arg-type]
        DeadLetterWriter(producer, "test"),
        on_tombstone=delete if with_tombstones else None,
    )
    return loop, consumer, producer


def _dead_letters(producer: RecordingProducer) -> list[tuple[Any, ...]]:
    letters = [decode(DeadLetter, raw) for raw in producer.to(dead_letter_topic(TOPIC))]
    return [(d.original_key, d.original_value, d.stage, d.source_offset) for d in letters]


def test_tombstones_delete_in_their_place_among_the_records() -> None:
    batch = [_record("a"), Hostile("gone", b"a", None), _record("b"),
             Hostile("refused", b"refused", None), _record("a"),
             Hostile("invalid key", b"not an id", None)]
    seen: list[str] = []
    loop, consumer, producer = _loop(batch, seen, with_tombstones=True)
    loop.run_once()
    assert seen == ["put a", "delete a", "put b", "put a"]
    assert _dead_letters(producer) == [
        (b"refused", None, "apply", 3), (b"not an id", None, "validate", 5),
    ]
    assert consumer.committed == [0, 1, 2, 3, 4, 5]
    assert (loop.counters.handled, loop.counters.dead_lettered) == (4, 2)


def test_without_a_delete_handler_a_tombstone_is_a_record_without_a_value() -> None:
    batch = [_record("a"), Hostile("gone", b"a", None), Hostile("no key", None, None)]
    seen: list[str] = []
    loop, _, producer = _loop(batch, seen, with_tombstones=False)
    loop.run_once()
    assert seen == ["put a"]
    assert [(k, v, stage) for k, v, stage, _ in _dead_letters(producer)] == [
        (b"a", None, "validate"), (None, None, "validate"),
    ]


def test_a_table_reader_dead_letters_a_value_less_record_without_a_key() -> None:
    seen: list[str] = []
    loop, _, producer = _loop([Hostile("no key", None, None)], seen, with_tombstones=True)
    loop.run_once()
    assert seen == []
    assert [(k, stage) for k, _, stage, _ in _dead_letters(producer)] == [(None, "validate")]
