"""Model publications on `model.updates` (compacted, keyed by model name)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from schemas.fields import STRICT_RECORD, Id, Text, Timestamp

Version = Annotated[str, Field(pattern=r"^[0-9]{1,6}\.[0-9]{1,9}$")]
"""`major.minor`: a full retrain bumps major, each gated online publication bumps minor."""

Metrics = Annotated[dict[Id, Annotated[float, Field(ge=-1e12, le=1e12)]], Field(max_length=64)]


class TrainingWindow(BaseModel):
    model_config = STRICT_RECORD

    start: Timestamp
    end: Timestamp
    events: Annotated[int, Field(ge=0)]


class ModelUpdate(BaseModel):
    model_config = STRICT_RECORD

    schema_version: Literal[1] = 1
    model_name: Id
    version: Version
    kind: Literal["delta", "full"]
    base_version: Version | None = None
    """The version a delta applies on top of; None for a full checkpoint."""
    stage: Literal["candidate", "serving", "rolled_back"] = "serving"
    location: Annotated[str, Field(min_length=1, max_length=1024)]
    metrics: Metrics = Field(default_factory=dict)
    window: TrainingWindow | None = None
    published_at: Timestamp
    note: Text = ""
