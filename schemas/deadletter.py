"""Dead letters: a rejected record with everything needed to inspect and replay it."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, Field

from schemas.fields import STRICT_RECORD, Id, Text, Timestamp

# A dead letter carries the original bytes even when they were oversized; its topic allows that.
MAX_ORIGINAL_BYTES = 4 * 1024 * 1024


class DeadLetter(BaseModel):
    """Value on `*.dlq` topics; the key is the original key unchanged."""

    model_config = STRICT_RECORD
    # base64 grows the original by 4/3; the dead-letter topics allow messages this large.
    WIRE_MAX_BYTES: ClassVar[int] = 3 * MAX_ORIGINAL_BYTES

    schema_version: Literal[1] = 1
    original_key: Annotated[bytes, Field(max_length=MAX_ORIGINAL_BYTES)] | None
    original_value: Annotated[bytes, Field(max_length=MAX_ORIGINAL_BYTES)] | None
    original_truncated: bool = False
    error_class: Id
    error_message: Text
    source_topic: Id
    source_partition: Annotated[int, Field(ge=0, le=1_000_000)]
    source_offset: Annotated[int, Field(ge=0)]
    source_timestamp_ms: Annotated[int, Field(ge=0)] | None = None
    stage: Literal["decode", "validate", "apply", "score", "train", "monitor"]
    service: Id
    failed_at: Timestamp
