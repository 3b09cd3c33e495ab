"""JSON on the wire: one encode and one decode for every contract, with the size cap enforced.

Decoding never raises anything but `ContractError`, whose message names the failing fields and
reasons but never echoes the payload (payloads may hold personal data and must not reach logs).
"""

from __future__ import annotations

import time
from functools import cache
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from schemas.fields import ReadContext
from schemas.limits import DEFAULT_MAX_FUTURE_SKEW_S, MAX_PAYLOAD_BYTES

R = TypeVar("R", bound=BaseModel)

_MAX_ERRORS_IN_MESSAGE = 5


class ContractError(ValueError):
    """A record that does not satisfy its contract; `kind` is a stable class name for the DLQ."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@cache  # a missing attribute on a pydantic class is a slow lookup, and this runs per record
def wire_cap(model: type[BaseModel]) -> int:
    """A record type may declare a larger cap (dead letters wrap oversized originals)."""
    return int(getattr(model, "WIRE_MAX_BYTES", MAX_PAYLOAD_BYTES))


def encode(record: BaseModel) -> bytes:
    """Serialise a record; refuses to produce anything a consumer would reject for size."""
    raw = record.model_dump_json(exclude_none=False).encode()
    if len(raw) > wire_cap(type(record)):
        raise ContractError(
            "PayloadTooLarge", f"encoded {type(record).__name__} is {len(raw)} bytes"
        )
    return raw


def decode(
    model: type[R],
    raw: bytes | None,
    max_future_skew_s: float = DEFAULT_MAX_FUTURE_SKEW_S,
    now: float | None = None,
) -> R:
    """Parse and validate one record from its wire bytes.

    Beyond the record's own bounds, no timestamp in it may be more than `max_future_skew_s`
    ahead of `now` (this process's clock by default): a record cannot know the reader's time,
    so this one rule is the reader's (services pass their `max_future_skew_s` setting)."""
    if raw is None:
        raise ContractError("MissingValue", "record has no value (tombstone or null)")
    cap = wire_cap(model)
    if len(raw) > cap:
        raise ContractError("PayloadTooLarge", f"payload is {len(raw)} bytes, the cap is {cap}")
    try:
        # Strict UTF-8 up front: a lone surrogate or a stray byte is an encoding error, not JSON.
        raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise ContractError(
            "InvalidEncoding", f"payload is not UTF-8 at byte {exc.start}"
        ) from None
    try:
        latest = (time.time() if now is None else now) + max_future_skew_s
        return model.model_validate_json(raw, context=ReadContext(latest))
    except ValidationError as exc:
        raise _contract_error(model, exc) from None


def _contract_error(model: type[BaseModel], exc: ValidationError) -> ContractError:
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    if any(e["type"] in {"json_invalid", "json_type"} for e in errors):
        kind = "MalformedJson"
    else:
        kind = "SchemaViolation"
    parts = [
        f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}"
        for e in errors[:_MAX_ERRORS_IN_MESSAGE]
    ]
    more = len(errors) - _MAX_ERRORS_IN_MESSAGE
    suffix = f" (+{more} more)" if more > 0 else ""
    return ContractError(kind, f"{model.__name__}: " + "; ".join(parts) + suffix)
