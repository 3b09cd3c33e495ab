"""Dead letters: a rejected record with everything needed to inspect and replay it."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, Field
from pydantic.json_schema import WithJsonSchema

from schemas.fields import INTEGRAL, STRICT_RECORD, Id, SchemaVersion1, Text, Timestamp

# A dead letter carries the original bytes even when they were oversized; its topic allows that.
MAX_ORIGINAL_BYTES = 4 * 1024 * 1024

_B64 = "[A-Za-z0-9_-]"
_CANONICAL_BASE64 = (
    rf"(?:{_B64}{{4}})*(?:{_B64}[AQgw]==|{_B64}{{2}}[AEIMQUYcgkosw048]=)?"
)
"""URL-safe base64 as pydantic writes it: padded, unused trailing bits zero (one spelling per
byte string, which every regex engine can check)."""
_CANONICAL_BASE64_RE = re.compile(_CANONICAL_BASE64)


def _from_base64(value: object) -> object:
    # On the wire (a str) only the canonical spelling is accepted; in-process bytes pass as is.
    if not isinstance(value, str):
        return value
    if _CANONICAL_BASE64_RE.fullmatch(value) is None:
        raise ValueError("expected padded URL-safe base64")
    try:
        return base64.urlsafe_b64decode(value)
    except binascii.Error as exc:
        raise ValueError("expected padded URL-safe base64") from exc


OriginalBytes = Annotated[
    bytes,
    Field(max_length=MAX_ORIGINAL_BYTES),
    BeforeValidator(_from_base64),
    WithJsonSchema(
        {
            "type": "string",
            "contentEncoding": "base64url",
            "maxLength": 4 * -(-MAX_ORIGINAL_BYTES // 3),
            "pattern": f"^{_CANONICAL_BASE64}$",
            "not": {"pattern": "[^A-Za-z0-9_=-]"},
        }
    ),
]
"""Bytes of a rejected record, base64 on the wire (the JSON Schema bounds the encoded length)."""


class DeadLetter(BaseModel):
    """Value on `*.dlq` topics; the key is the original key unchanged."""

    model_config = STRICT_RECORD
    # base64 grows the original by 4/3; the dead-letter topics allow messages this large.
    WIRE_MAX_BYTES: ClassVar[int] = 3 * MAX_ORIGINAL_BYTES

    schema_version: SchemaVersion1 = 1
    original_key: OriginalBytes | None
    original_value: OriginalBytes | None
    original_truncated: bool = False
    error_class: Id
    error_message: Text
    source_topic: Id
    source_partition: Annotated[int, Field(ge=0, le=1_000_000), INTEGRAL]
    source_offset: Annotated[int, Field(ge=0), INTEGRAL]
    source_timestamp_ms: Annotated[int, Field(ge=0), INTEGRAL] | None = None
    stage: Literal["decode", "validate", "apply", "score", "train", "monitor"]
    service: Id
    failed_at: Timestamp
