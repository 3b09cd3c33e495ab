"""The response contract read fast: msgspec Structs mirroring `schemas.recommendations`'
`RecommendationResponse`, for the monitor's batches.

`RecommendationResponse` (pydantic) stays the contract. This mirror holds every rule it holds,
with the same strictness, as schemas/interaction_decoder.py does for interactions: unknown
fields refused, no coercion, the id rule, the closed enumerations, the item count and score
bounds, the fixed timestamp bounds, bounded freshness figures, the error message's text rule,
the rule that an error answer (and only one) carries an error, the payload cap and the reader's
future-skew rule. Where it refuses a record it says nothing of why: `decode_response` returns
None and the caller asks the contract (`schemas.wire.decode`), whose verdict and error stand.
tests/unit/schemas/test_response_decoder.py runs the hostile corpus and thousands of mutated
records through both.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct

from schemas.fields import TEXT_FORBIDDEN
from schemas.limits import (
    MAX_ID_LENGTH,
    MAX_K,
    MAX_PAYLOAD_BYTES,
    MAX_TEXT_LENGTH,
    MAX_TIMESTAMP_S,
    MIN_TIMESTAMP_S,
)

# The id rule's characters are checked once per record over all its ids (`_ids_valid`), not by
# a pattern per field: msgspec runs a Python `re` search per string, 14 of them per answer.
_Id = Annotated[str, Meta(min_length=1, max_length=MAX_ID_LENGTH)]
_Text = Annotated[str, Meta(max_length=MAX_TEXT_LENGTH, pattern=rf"\A[^{TEXT_FORBIDDEN}]*\Z")]
_Freshness = Annotated[float, Meta(ge=0.0, le=1e12)]
Strategy = Literal["model", "ranker", "canary", "popularity", "none"]
ErrorCode = Literal["invalid_request", "internal", "overloaded"]


# Records hold strings, numbers and records, never a cycle: untracked by the garbage collector
# (gc=False), which then need not scan them (the monitor holds thousands of open answers).
class ScoredItemRecord(Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """`schemas.recommendations.ScoredItem`."""

    item_id: _Id
    score: Annotated[float, Meta(ge=-1e6, le=1e6)]


class ResponseErrorRecord(Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """`schemas.recommendations.ResponseError`."""

    code: ErrorCode
    message: _Text


class ResponseRecord(Struct, frozen=True, gc=False, forbid_unknown_fields=True, kw_only=True):
    """`schemas.recommendations.RecommendationResponse`: the same fields, names and values."""

    schema_version: Annotated[float, Meta(ge=2, le=2)] = 2
    """The contract's Literal[2] takes the JSON number 2 in either spelling (2 or 2.0)."""
    request_id: _Id
    user_id: _Id
    status: Literal["ok", "error"]
    items: Annotated[list[ScoredItemRecord], Meta(max_length=MAX_K)] = []
    model_version: _Id | None = None
    strategy: Strategy = "model"
    feature_freshness_ms: _Freshness | None = None
    model_freshness_ms: _Freshness | None = None
    served_at: Annotated[float, Meta(gt=MIN_TIMESTAMP_S, le=MAX_TIMESTAMP_S)]
    experiment: _Id | None = None
    arm: _Id | None = None
    error: ResponseErrorRecord | None = None


_DECODER = msgspec.json.Decoder(ResponseRecord)


def decode_response(raw: bytes | None, latest_timestamp: float) -> ResponseRecord | None:
    """The record when the fast path can vouch for it (valid, and served at most
    `latest_timestamp`: the reader's now plus its allowed skew), else None: then the contract
    (`schemas.wire.decode`) decides, and explains a refusal."""
    if raw is None or len(raw) > MAX_PAYLOAD_BYTES:
        return None
    try:
        record = _DECODER.decode(raw)
    except Exception:  # DecodeError, or UnicodeDecodeError on a name that is not UTF-8: any
        return None  # failure is the contract's to judge and explain
    if (record.status == "error") != (record.error is not None):
        return None
    if record.served_at > latest_timestamp or not _ids_valid(record):
        return None
    return record


def _ids_valid(record: ResponseRecord) -> bool:
    """Every id of the record holds only `schemas.fields.ID_CHARACTERS` (printable ASCII but
    the space)."""
    parts = [item.item_id for item in record.items]
    parts += (record.request_id, record.user_id, record.model_version or "",
              record.experiment or "", record.arm or "")
    ids = "".join(parts)
    return ids.isascii() and ids.isprintable() and " " not in ids
