"""The interaction contract read fast: msgspec Structs mirroring `schemas.events`, for the feature
worker's batches.

`schemas.events.InteractionEvent` (pydantic) stays the contract. This mirror holds every rule it
holds, with the same strictness, so that a record it accepts is one the contract accepts with
the same values: unknown fields refused, no coercion (a string is never a number, `true` never
1), whole JSON numbers where the contract takes them, the id rule (1-128 characters of
`ID_CHARACTERS`, matched whole), the closed enumerations, the fixed timestamp bounds, a finite
bounded price, the payload cap and the reader's future-skew rule. Where it refuses a record, it
says nothing of why: `decode_interaction` then returns None and the caller asks the contract
(`schemas.wire.decode`), whose verdict and error (kind and message) stand. So a record's fate
never depends on which path read it (tests/unit/schemas/test_interaction_decoder.py runs the
hostile corpus and thousands of mutated records through both), and msgspec's 2-7x cheaper
decode serves every valid record, which is nearly all of them.

`decode_interactions` reads a whole batch so: one C call per record and the size, time and id
checks once over the batch, with the record-by-record path only for a batch that holds a record
the mirror does not vouch for.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from operator import attrgetter
from typing import Annotated, Literal, cast

import msgspec
from msgspec import Meta, Struct

from schemas.events import EventType
from schemas.limits import MAX_ID_LENGTH, MAX_PAYLOAD_BYTES, MAX_TIMESTAMP_S, MIN_TIMESTAMP_S

# The id rule's characters are checked once per record over all its ids (`_ids_valid`), not by
# a pattern per field: msgspec runs a Python `re` search per string.
_Id = Annotated[str, Meta(min_length=1, max_length=MAX_ID_LENGTH)]
Device = Literal["web", "ios", "android", "tv", "other"]
Source = Literal["search", "home", "recommendation", "category", "other"]


# Records hold strings, numbers and records, never a cycle: untracked by the garbage collector
# (gc=False), which then need not track the thousands a batch decodes.
class InteractionContext(Struct, frozen=True, gc=False, forbid_unknown_fields=True, kw_only=True):
    """`schemas.events.EventContext`."""

    price: Annotated[float, Meta(ge=0.0, le=1e9)] | None = None
    category: _Id | None = None
    device: Device | None = None
    source: Source | None = None
    request_id: _Id | None = None


class InteractionRecord(Struct, frozen=True, gc=False, forbid_unknown_fields=True, kw_only=True):
    """`schemas.events.InteractionEvent`: the same fields, names and values."""

    schema_version: Annotated[float, Meta(ge=1, le=1)] = 1
    """The contract's Literal[1] takes the JSON number 1 in either spelling (1 or 1.0)."""
    event_id: _Id
    user_id: _Id
    session_id: _Id
    item_id: _Id
    event_type: EventType
    timestamp: Annotated[float, Meta(gt=MIN_TIMESTAMP_S, le=MAX_TIMESTAMP_S)]
    context: InteractionContext | None = None


_DECODER = msgspec.json.Decoder(InteractionRecord)


def decode_interaction(raw: bytes | None, latest_timestamp: float) -> InteractionRecord | None:
    """The record when the fast path can vouch for it (valid, and dated at most
    `latest_timestamp`: the reader's now plus its allowed skew), else None: then the contract
    (`schemas.wire.decode`) decides, and explains a refusal."""
    if raw is None or len(raw) > MAX_PAYLOAD_BYTES:
        return None
    try:
        record = _DECODER.decode(raw)
    except Exception:  # DecodeError, or UnicodeDecodeError on a name that is not UTF-8: any
        return None  # failure is the contract's to judge and explain

    if record.timestamp > latest_timestamp or not _ids_valid(record):
        return None
    return record


def _ids_valid(record: InteractionRecord) -> bool:
    """Every id of the record holds only `schemas.fields.ID_CHARACTERS` (printable ASCII but
    the space)."""
    ids = record.event_id + record.user_id + record.session_id + record.item_id
    context = record.context
    if context is not None:
        if context.category is not None:
            ids += context.category
        if context.request_id is not None:
            ids += context.request_id
    return ids.isascii() and ids.isprintable() and " " not in ids


_TIMESTAMP = attrgetter("timestamp")
_IDS = attrgetter("event_id", "user_id", "session_id", "item_id")
_CONTEXT = attrgetter("context")


def decode_interactions(
    raws: Sequence[bytes | None], latest_timestamp: float
) -> list[InteractionRecord | None]:
    """`decode_interaction` of each record. A batch of valid records costs one msgspec call
    each and the checks once over the whole batch; a batch with a record that fails any of them
    is read record by record, so every record gets exactly `decode_interaction`'s answer."""
    if None in raws:
        return [decode_interaction(raw, latest_timestamp) for raw in raws]
    payloads = cast(Sequence[bytes], raws)
    try:
        if max(map(len, payloads), default=0) > MAX_PAYLOAD_BYTES:
            raise ValueError("a payload over the cap")
        records: list[InteractionRecord | None] = list(map(_DECODER.decode, payloads))
    except Exception:  # any refusal: the records are judged one by one
        return [decode_interaction(raw, latest_timestamp) for raw in raws]
    if records and (
        max(map(_TIMESTAMP, records)) > latest_timestamp or not _batch_ids_valid(records)
    ):
        return [decode_interaction(raw, latest_timestamp) for raw in raws]
    return records


def _batch_ids_valid(records: list[InteractionRecord | None]) -> bool:
    """`_ids_valid` of every record, checked on all their ids at once."""
    contexts = [c for c in map(_CONTEXT, records) if c is not None]
    ids = "".join(chain(
        chain.from_iterable(map(_IDS, records)),
        [c.category for c in contexts if c.category is not None],
        [c.request_id for c in contexts if c.request_id is not None],
    ))
    return ids.isascii() and ids.isprintable() and " " not in ids
