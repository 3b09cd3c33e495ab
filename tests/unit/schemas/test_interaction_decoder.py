"""The msgspec mirror of the interaction contract judges every record as the contract does.

The contract (pydantic, `schemas.wire.decode`) is the reference. The mirror's own verdict is
compared with it on the hostile corpus, on every field mutation the JSON Schema agreement test
makes, on generated events (both traffic generators) and on thousands of byte-level mutations of
them: the mirror must never accept what the contract refuses, must give the same values when
both accept, and must accept what the contract accepts except where it hands the record back
(None: the contract then decides, see `decode_interaction`), which only duplicate field names
may cause. The feature worker's `validate` (mirror first, contract on a refusal) must agree with
the contract on every record, and keep the contract's error kind and message. The mirror's
batch reading (`decode_interactions`, checks once per batch) must give every record exactly the
record-by-record answer, whatever else its batch holds.
"""

from __future__ import annotations

import json
import math
import random
import time
import typing
from collections.abc import Iterator

import numpy as np
import pytest

from bench.load import InteractionDraw
from deploy.generators.sample import SampleConfig, SampleGenerator
from schemas import ContractError, decode, encode
from schemas.events import EventContext, EventType, InteractionEvent
from schemas.interaction_decoder import (
    Device,
    InteractionRecord,
    Source,
    decode_interaction,
    decode_interactions,
)
from schemas.limits import DEFAULT_MAX_FUTURE_SKEW_S, MAX_PAYLOAD_BYTES
from streams.feature_worker.pipeline import SourceRecord, validate
from tests.hostile_corpus import corpus
from tests.unit.schemas.test_jsonschema_agreement import _documents

NOW = time.time()
LATEST = NOW + DEFAULT_MAX_FUTURE_SKEW_S


def _contract(raw: bytes | None) -> InteractionEvent | ContractError:
    try:
        return decode(InteractionEvent, raw, DEFAULT_MAX_FUTURE_SKEW_S, now=NOW)
    except ContractError as error:
        return error


def _same_values(fast: InteractionRecord, event: InteractionEvent) -> bool:
    names = ("event_id", "user_id", "session_id", "item_id", "event_type")
    if any(getattr(fast, n) != getattr(event, n) for n in names):
        return False
    if repr(fast.timestamp) != repr(event.timestamp) or type(fast.event_type) is not type(
        event.event_type
    ):
        return False
    if (fast.context is None) != (event.context is None):
        return False
    if fast.context is None or event.context is None:
        return True
    return all(
        repr(getattr(fast.context, n)) == repr(getattr(event.context, n))
        for n in EventContext.model_fields
    )


def _generated() -> Iterator[bytes]:
    start = NOW - 200 * 86_400
    for event in SampleGenerator(SampleConfig(seed=5), start_ts=start).events(1500):
        yield encode(event)
    draw = InteractionDraw(np.random.default_rng(3), 10_000, 500, 20)
    for _, value in draw.payloads([NOW - 10 + n / 100 for n in range(1000)]):
        yield value


def _byte_mutations(valid: list[bytes], n: int, seed: int) -> Iterator[bytes]:
    rng = random.Random(seed)
    alphabet = b'{}[]":,.-+0123456789eEtrufalsn \\\n\x00\xff\x7fabcxyz_'
    for _ in range(n):
        raw = bytearray(rng.choice(valid))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(raw))
            op = rng.random()
            if op < 0.4:
                raw[at] = rng.choice(alphabet)
            elif op < 0.7:
                del raw[at]
            else:
                raw.insert(at, rng.choice(alphabet))
        yield bytes(raw)


def _field_mutations() -> Iterator[bytes]:
    for _, document in _documents("InteractionEvent"):
        yield json.dumps(document).encode()


def _duplicates() -> Iterator[bytes]:
    valid = encode(next(SampleGenerator(SampleConfig(seed=1), start_ts=NOW - 86_400).events(1)))
    for name, first in (("user_id", '"bad id"'), ("timestamp", "1e18"), ("user_id", '"u-9"')):
        yield valid[:-1] + f', "{name}": {first}}}'.encode()
        yield b"{" + f'"{name}": {first}, '.encode() + valid[1:]


def _all_records() -> list[bytes | None]:
    generated = list(_generated())
    return [
        *(h.value for h in corpus("interactions", NOW)),
        *_field_mutations(),
        *generated,
        *_byte_mutations(generated, 6000, seed=11),
        *_duplicates(),
    ]


@pytest.fixture(scope="module")
def records() -> list[bytes | None]:
    return _all_records()


def test_the_mirror_never_accepts_what_the_contract_refuses_and_reads_the_same_values(
    records: list[bytes | None],
) -> None:
    wrong, handed_back = [], []
    for raw in records:
        fast, reference = decode_interaction(raw, LATEST), _contract(raw)
        if fast is None:
            if isinstance(reference, InteractionEvent):
                handed_back.append(raw)
        elif isinstance(reference, ContractError) or not _same_values(fast, reference):
            wrong.append((raw, reference))
    assert wrong == []
    # Only a repeated field name (the contract keeps the last) is left to the contract.
    assert all(raw is not None and raw.count(b'"user_id"') + raw.count(b'"timestamp"') > 2
               for raw in handed_back), handed_back[:3]
    assert len(handed_back) <= 2


def test_both_verdicts_occur_often_in_the_corpus(records: list[bytes | None]) -> None:
    accepted = sum(decode_interaction(raw, LATEST) is not None for raw in records)
    assert 2500 <= accepted <= len(records) - 3000


def test_the_worker_validation_agrees_with_the_contract_on_every_record(
    records: list[bytes | None],
) -> None:
    sources = [SourceRecord("interactions", 0, n, b"k", raw) for n, raw in enumerate(records)]
    valid, rejected = validate(sources, DEFAULT_MAX_FUTURE_SKEW_S, now=NOW)
    accepted = {record.offset for record, _ in valid}
    errors = {r.record.offset: r.error for r in rejected}
    assert accepted.isdisjoint(errors)
    assert len(accepted) + len(errors) == len(records)
    for record, positioned in valid:
        reference = _contract(record.value)
        assert isinstance(reference, InteractionEvent), record.value
        fast = positioned.event
        assert isinstance(fast, InteractionRecord | InteractionEvent)
        assert fast == reference or (
            isinstance(fast, InteractionRecord) and _same_values(fast, reference)
        )
    for offset, error in errors.items():
        reference = _contract(records[offset])
        assert isinstance(reference, ContractError), records[offset]
        assert isinstance(error, ContractError)
        assert (error.kind, str(error)) == (reference.kind, str(reference))


def test_an_event_ahead_of_the_reader_by_more_than_the_skew_is_handed_to_the_contract() -> None:
    event = json.loads(encode(next(SampleGenerator(SampleConfig(seed=2)).events(1))))
    ahead = json.dumps(event | {"timestamp": NOW + DEFAULT_MAX_FUTURE_SKEW_S + 60}).encode()
    just = json.dumps(event | {"timestamp": NOW + DEFAULT_MAX_FUTURE_SKEW_S - 60}).encode()
    assert decode_interaction(ahead, LATEST) is None
    assert isinstance(_contract(ahead), ContractError)
    assert decode_interaction(just, LATEST) is not None


def test_the_mirror_spells_the_contract_fields_and_choices() -> None:
    assert set(InteractionRecord.__struct_fields__) == set(InteractionEvent.model_fields)
    context_fields = EventContext.model_fields
    assert set(context_fields) == {
        "price", "category", "device", "source", "request_id",
    }
    for name, choices in (("device", Device), ("source", Source)):
        literal = typing.get_args(context_fields[name].annotation)[0]
        assert typing.get_args(literal) == typing.get_args(choices)
    assert not math.isnan(LATEST)


def test_the_mirror_takes_an_id_character_exactly_when_the_contract_does() -> None:
    base = InteractionEvent(
        event_id="e1", user_id="u1", session_id="s1", item_id="i1", event_type=EventType.CLICK,
        timestamp=NOW, context=EventContext(category="c", request_id="r1"),
    ).model_dump(mode="json")
    for code in range(0x300):
        for field in ("event_id", "user_id", "session_id", "item_id", "category", "request_id"):
            record = json.loads(json.dumps(base))
            target = record["context"] if field in ("category", "request_id") else record
            target[field] = "x" + chr(code)
            raw = json.dumps(record).encode()
            accepted = not isinstance(_contract(raw), ContractError)
            assert (decode_interaction(raw, LATEST) is not None) == accepted, (field, hex(code))


def _one_by_one(raws: list[bytes | None]) -> list[InteractionRecord | None]:
    return [decode_interaction(raw, LATEST) for raw in raws]


def test_a_batch_read_gives_every_record_its_record_by_record_answer(
    records: list[bytes | None],
) -> None:
    rng = random.Random(7)
    valid = [raw for raw in records if decode_interaction(raw, LATEST) is not None]
    batches = [rng.sample(records, rng.randint(1, 40)) for _ in range(400)]
    batches += [rng.sample(valid, rng.randint(1, 40)) for _ in range(100)]
    batches += [[*rng.sample(valid, 20), raw] for raw in rng.sample(records, 200)]
    for batch in batches:
        assert decode_interactions(batch, LATEST) == _one_by_one(batch)
    assert decode_interactions([], LATEST) == []


def test_a_batch_read_refuses_exactly_the_record_each_batch_check_refuses() -> None:
    events = SampleGenerator(SampleConfig(seed=8), start_ts=NOW - 86_400).events(30)
    good = [json.loads(encode(event)) for event in events]
    bad_id = good[0] | {"user_id": "u\x7f"}
    bad_category = good[1] | {"context": {"category": "c 1"}}
    ahead = good[2] | {"timestamp": LATEST + 1}
    encoded = [json.dumps(record).encode() for record in good]
    raws: list[bytes | None] = list(encoded)
    oversized = encoded[3] + b" " * MAX_PAYLOAD_BYTES  # valid JSON, over the cap
    for odd in (bad_id, bad_category, ahead):
        batch = [*raws, json.dumps(odd).encode()]
        decoded = decode_interactions(batch, LATEST)
        assert decoded[-1] is None and None not in decoded[:-1]
        assert decoded == _one_by_one(batch)
    for odd_raw in (oversized, None):
        batch = [*raws, odd_raw]
        assert decode_interactions(batch, LATEST) == _one_by_one(batch)
        assert decode_interactions(batch, LATEST)[-1] is None
