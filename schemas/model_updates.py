"""Model publications on `model.updates` (compacted, keyed by model name).

A record names a version in the model store, never a path, and carries the version's digest
(models/store.py); the scorer loads from its own store root and checks the digest before it uses
a byte. Versions only move forward: a record that points serving at an older version is honoured
only when it says which serving version it rolls back (`rollback_from`), as the trainer's and the
canary's rollbacks do.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints
from pydantic.json_schema import WithJsonSchema

from schemas.fields import INTEGRAL, STRICT_RECORD, Id, SchemaVersion2, Text, Timestamp

Version = Annotated[
    str,
    StringConstraints(pattern=r"\A[0-9]{1,6}\.[0-9]{1,9}\z"),
    # "Only digits and a dot" as well: Python-`re` validators let `$` match before a final "\n".
    WithJsonSchema(
        {
            "type": "string",
            "pattern": r"^[0-9]{1,6}\.[0-9]{1,9}$",
            "not": {"pattern": "[^0-9.]"},
        }
    ),
]
"""`major.minor`: a full retrain bumps major, each gated online publication bumps minor."""

ModelName = Annotated[
    str,
    StringConstraints(pattern=r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\z"),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$",
            "not": {"pattern": "[^A-Za-z0-9_.-]"},
        }
    ),
]
"""A folder name in the model store: no separators, no leading dot, so never a path."""

Sha256 = Annotated[
    str,
    StringConstraints(pattern=r"\A[0-9a-f]{64}\z"),
    WithJsonSchema(
        {"type": "string", "pattern": "^[0-9a-f]{64}$", "not": {"pattern": "[^0-9a-f]"}}
    ),
]
"""Lower-case hex sha256 of a stored version."""

Metrics = Annotated[dict[Id, Annotated[float, Field(ge=-1e12, le=1e12)]], Field(max_length=64)]


class TrainingWindow(BaseModel):
    model_config = STRICT_RECORD

    start: Timestamp
    end: Timestamp
    events: Annotated[int, Field(ge=0), INTEGRAL]


class ModelUpdate(BaseModel):
    model_config = STRICT_RECORD

    schema_version: SchemaVersion2 = 2
    model_name: ModelName
    version: Version
    kind: Literal["delta", "full"]
    base_version: Version | None = None
    """The version a delta applies on top of; None for a full checkpoint."""
    stage: Literal["candidate", "serving", "rolled_back"] = "serving"
    sha256: Sha256
    """Digest of the stored version (weights file, then manifest file)."""
    rollback_from: Version | None = None
    """Set on an explicit rollback: the serving version this record replaces with an older one."""
    metrics: Metrics = Field(default_factory=dict)
    window: TrainingWindow | None = None
    published_at: Timestamp
    note: Text = ""
