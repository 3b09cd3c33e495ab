"""Model publications on `model.updates` (compacted, keyed by model name).

A record names a version in the model store, never a path, and carries the version's digest
(models/store.py); the scorer loads from its own store root and checks the digest before it uses
a byte. Versions only move forward: a record that points serving at an older version is honoured
only when it says which serving version it rolls back (`rollback_from`), as the trainer's and the
canary's rollbacks do.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from schemas.fields import (
    INTEGRAL,
    STRICT_RECORD,
    Id,
    SchemaVersion2,
    Text,
    Timestamp,
    full_match,
)

Version = Annotated[str, *full_match(r"[0-9]{1,6}\.[0-9]{1,9}", "0-9.")]
"""`major.minor`: a full retrain bumps major, each gated online publication bumps minor."""


def version_key(version: str) -> tuple[int, int]:
    """A `major.minor` version as a pair that orders versions."""
    major, _, minor = version.partition(".")
    return int(major), int(minor)


def major_part(version: str) -> str:
    """The full-retrain lineage of a version: "2" of "2.3"."""
    return version.partition(".")[0]


ModelName = Annotated[str, *full_match(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", "A-Za-z0-9_.-")]
"""A folder name in the model store: no separators, no leading dot, so never a path."""

Sha256 = Annotated[str, *full_match("[0-9a-f]{64}", "0-9a-f")]
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
