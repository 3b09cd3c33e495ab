"""Constrained field types shared by every contract."""

from __future__ import annotations

import math
import time
from typing import Annotated

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints

from schemas.limits import (
    MAX_CLOCK_SKEW_S,
    MAX_ID_LENGTH,
    MAX_LIST_LENGTH,
    MAX_TEXT_LENGTH,
    MIN_TIMESTAMP_S,
)

STRICT_RECORD = ConfigDict(
    extra="forbid",
    strict=True,
    frozen=True,
    allow_inf_nan=False,
    str_max_length=MAX_TEXT_LENGTH,
    ser_json_bytes="base64",
    val_json_bytes="base64",
    ser_json_inf_nan="null",
)
"""Every wire record: unknown fields rejected, no coercion, no NaN/Inf, immutable."""

# Printable ASCII without spaces: safe in Redis keys, logs, metrics labels and URLs.
Id = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_ID_LENGTH, pattern=r"^[\x21-\x7e]+$"),
]


def _printable(value: str) -> str:
    if not value.isprintable():
        raise ValueError("text must be printable (no control characters)")
    return value


Text = Annotated[str, StringConstraints(max_length=MAX_TEXT_LENGTH), AfterValidator(_printable)]


def _sane_timestamp(value: float) -> float:
    # The upper bound moves with the clock, so it cannot be a static Field(le=...).
    if not math.isfinite(value):
        raise ValueError("timestamp must be finite")
    if value <= MIN_TIMESTAMP_S:
        raise ValueError("timestamp must be positive Unix seconds")
    if value > time.time() + MAX_CLOCK_SKEW_S:
        raise ValueError("timestamp is too far in the future")
    return value


Timestamp = Annotated[float, AfterValidator(_sane_timestamp)]
"""Unix time in seconds (float), positive and at most a day ahead of this machine's clock."""

Score = Annotated[float, Field(ge=-1e6, le=1e6)]
NonNegative = Annotated[float, Field(ge=0.0, le=1e12)]
Rate = Annotated[float, Field(ge=0.0, le=1.0)]
Count = Annotated[int, Field(ge=0, le=2**53)]

IdList = Annotated[list[Id], Field(max_length=MAX_LIST_LENGTH)]
