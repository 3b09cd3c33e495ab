"""Model publications on `model.updates` (compacted, one key per model version).

A record names a version in the model store, never a path, and carries the version's digest
(models/store.py); the scorer loads from its own store root and checks the digest before it uses
a byte. Each record states what its version is now (`stage`): announced as a candidate for the
canary, serving, or rolled back. Its key is `<model>/<version>` (`update_key`), so the compacted
log keeps every version's newest record, and what serves follows from those alone
(schemas/model_log.py): a scorer started on the whole log or on the compacted one serves what the
running scorers serve.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from schemas.fields import (
    INTEGRAL,
    STRICT_RECORD,
    Id,
    SchemaVersion3,
    Text,
    Timestamp,
    full_match,
)
from schemas.wire import ContractError

_VERSION = r"[0-9]{1,6}\.[0-9]{1,9}"
_MODEL_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}"

Version = Annotated[str, *full_match(_VERSION, "0-9.")]
"""`major.minor`: a full retrain bumps major, each gated online publication bumps minor."""


def version_key(version: str) -> tuple[int, int]:
    """A `major.minor` version as a pair that orders versions."""
    major, _, minor = version.partition(".")
    return int(major), int(minor)


def major_part(version: str) -> str:
    """The full-retrain lineage of a version: "2" of "2.3"."""
    return version.partition(".")[0]


ModelName = Annotated[str, *full_match(_MODEL_NAME, "A-Za-z0-9_.-")]
"""A folder name in the model store: no separators, no leading dot, so never a path."""

Sha256 = Annotated[str, *full_match("[0-9a-f]{64}", "0-9a-f")]
"""Lower-case hex sha256 of a stored version."""

Metrics = Annotated[dict[Id, Annotated[float, Field(ge=-1e12, le=1e12)]], Field(max_length=64)]

Stage = Literal["candidate", "serving", "rolled_back"]


class TrainingWindow(BaseModel):
    model_config = STRICT_RECORD

    start: Timestamp
    end: Timestamp
    events: Annotated[int, Field(ge=0), INTEGRAL]


class ModelUpdate(BaseModel):
    model_config = STRICT_RECORD

    schema_version: SchemaVersion3 = 3
    model_name: ModelName
    version: Version
    kind: Literal["delta", "full"]
    base_version: Version | None = None
    """The version a delta applies on top of; None for a full checkpoint."""
    stage: Stage = "serving"
    """What this version is as of this record: a `candidate` the canary tries on a share of
    users, `serving`, or `rolled_back` (by the canary, the trainer or an operator): never
    served again."""
    sha256: Sha256
    """Digest of the stored version (weights file, then manifest file)."""
    metrics: Metrics = Field(default_factory=dict)
    window: TrainingWindow | None = None
    published_at: Timestamp
    note: Text = ""

    @property
    def log_key(self) -> str:
        """The record's key on `model.updates`."""
        return update_key(self.model_name, self.version)


def update_key(model_name: str, version: str) -> str:
    """`<model>/<version>`: a model name holds no `/`, so the key names one version."""
    return f"{model_name}/{version}"


def parse_update_key(key: bytes | None) -> tuple[str, str]:
    """(model name, version) of a `model.updates` key; ContractError for anything else."""
    try:
        text = (key or b"").decode("ascii")
    except UnicodeDecodeError as error:
        raise ContractError("InvalidEncoding", "model.updates key is not ASCII") from error
    model_name, slash, version = text.partition("/")
    if not (slash and _KEY.fullmatch(text)):
        raise ContractError("SchemaViolation", "model.updates key is not <model>/<version>")
    return model_name, version


_KEY = re.compile(f"{_MODEL_NAME}/{_VERSION}")
MODEL_NAME_RE = re.compile(_MODEL_NAME)
"""`ModelName`'s rule, for names met outside a record (folders of the model store)."""
VERSION_RE = re.compile(_VERSION)
"""`Version`'s rule, for names met outside a record (folders of the model store)."""
