"""Constrained field types shared by every contract.

Each rule is written once and checked two ways: by pydantic here, and by any JSON Schema
validator through the exported schemas (schemas/jsonschema_export.py). Character rules are
therefore expressed as character classes that Rust's `regex` (pydantic), Python's `re` and
ECMA-262 (JSON Schema) read alike; pydantic full-matches them (`\\A...\\z`, in the syntax of its
default Rust engine), while the JSON Schemas say "contains no character outside the class"
(`not` + an unanchored pattern), because anchors do not agree across engines: Python's `$` also
matches before a trailing newline, so `^...$` lets an id ending in "\\n" through there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeGuard

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
)
from pydantic.json_schema import WithJsonSchema

from schemas.limits import (
    MAX_ID_LENGTH,
    MAX_LIST_LENGTH,
    MAX_TEXT_LENGTH,
    MAX_TIMESTAMP_S,
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

ID_CHARACTERS = r"\x21-\x7e"
"""Printable ASCII without spaces: safe in Redis keys, logs, metrics labels and URLs."""

TEXT_FORBIDDEN = (
    r"\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff"
    r"\ufff9-\ufffb"
)
"""Characters free text may not hold: C0/C1 controls and DEL (newlines, escapes), invisible
format characters and bidirectional overrides (text that reads differently than it is), and
line/paragraph separators; anything else, any script, is allowed."""


def _characters_json_schema(forbidden: str, min_length: int, max_length: int) -> dict[str, Any]:
    """A string of these lengths holding no character of the class `[forbidden]`."""
    return {
        "type": "string",
        "minLength": min_length,
        "maxLength": max_length,
        "not": {"pattern": f"[{forbidden}]"},
    }


def full_match(body: str, characters: str) -> tuple[StringConstraints, WithJsonSchema]:
    """Constraints of a string matching the regex `body` whole, every character in the class
    `[characters]`: full-matched by pydantic (`\\A...\\z`); in the JSON Schema, `^...$` plus
    "no character outside the class", since a Python-`re` validator's `$` also matches before a
    final newline. Use as `Annotated[str, *full_match(...)]`."""
    return (
        StringConstraints(pattern=rf"\A{body}\z"),
        WithJsonSchema(
            {"type": "string", "pattern": f"^{body}$", "not": {"pattern": f"[^{characters}]"}}
        ),
    )


Id = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=MAX_ID_LENGTH, pattern=rf"\A[{ID_CHARACTERS}]+\z"
    ),
    WithJsonSchema(_characters_json_schema(f"^{ID_CHARACTERS}", 1, MAX_ID_LENGTH)),
]
_ID_RE = re.compile(rf"[{ID_CHARACTERS}]{{1,{MAX_ID_LENGTH}}}")


def is_id(value: object) -> TypeGuard[str]:
    """Whether `value` is a valid `Id` (for code that must recognise ids outside a record)."""
    return isinstance(value, str) and _ID_RE.fullmatch(value) is not None


Text = Annotated[
    str,
    StringConstraints(max_length=MAX_TEXT_LENGTH, pattern=rf"\A[^{TEXT_FORBIDDEN}]*\z"),
    WithJsonSchema(_characters_json_schema(TEXT_FORBIDDEN, 0, MAX_TEXT_LENGTH)),
]
_TEXT_FORBIDDEN_RE = re.compile(f"[{TEXT_FORBIDDEN}]")


def printable_text(text: str, limit: int = MAX_TEXT_LENGTH) -> str:
    """`text` made a valid `Text`: forbidden characters become "?", the rest is clipped."""
    return _TEXT_FORBIDDEN_RE.sub("?", text[:limit])


@dataclass(frozen=True)
class ReadContext:
    """What a reader knows that a record cannot: the reader's clock. schemas.wire.decode passes
    it as pydantic's validation context; records built in-process are checked without it."""

    latest_timestamp: float
    """No timestamp in the record may be later than this (the reader's now + allowed skew)."""


def _not_ahead(value: float, info: ValidationInfo) -> float:
    # NaN and infinities are refused by allow_inf_nan=False before this runs.
    context = info.context
    if isinstance(context, ReadContext) and value > context.latest_timestamp:
        raise ValueError("timestamp is ahead of the reader's clock by more than the allowed skew")
    return value


Timestamp = Annotated[
    float, Field(gt=MIN_TIMESTAMP_S, le=MAX_TIMESTAMP_S), AfterValidator(_not_ahead)
]
"""Unix time in seconds (float), after 1990 and before 2100 (fixed bounds every validator shares);
read from the wire, also at most the reader's allowed skew ahead of its clock."""



def _integral(value: object) -> object:
    # JSON has one kind of number: JSON Schema's "integer" is any number without a fraction, so
    # 10.0 is one (and every non-Python validator agrees); the strict int check runs after this.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


INTEGRAL = BeforeValidator(_integral)
"""Metadata for every int on the wire, after its bounds (`Annotated[int, Field(...), INTEGRAL]`,
so that the bounds stay in the JSON Schema): 10 or 10.0, never 10.5, "10" or true."""


def _not_boolean(value: object) -> object:
    # Python's True == 1, so a bare Literal[1] takes `true`; JSON (and its schemas) do not.
    if isinstance(value, bool):
        raise ValueError("expected a number, not a boolean")
    return value


SchemaVersion1 = Annotated[Literal[1], BeforeValidator(_not_boolean)]
SchemaVersion2 = Annotated[Literal[2], BeforeValidator(_not_boolean)]
SchemaVersion3 = Annotated[Literal[3], BeforeValidator(_not_boolean)]
SchemaVersion4 = Annotated[Literal[4], BeforeValidator(_not_boolean)]

Score = Annotated[float, Field(ge=-1e6, le=1e6)]
NonNegative = Annotated[float, Field(ge=0.0, le=1e12)]
Rate = Annotated[float, Field(ge=0.0, le=1.0)]
Count = Annotated[int, Field(ge=0, le=2**53), INTEGRAL]

IdList = Annotated[list[Id], Field(max_length=MAX_LIST_LENGTH)]
