"""Model publications on `model.updates` (compacted, keyed by model name)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints
from pydantic.json_schema import WithJsonSchema

from schemas.fields import INTEGRAL, STRICT_RECORD, Id, SchemaVersion1, Text, Timestamp

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

Metrics = Annotated[dict[Id, Annotated[float, Field(ge=-1e12, le=1e12)]], Field(max_length=64)]


class TrainingWindow(BaseModel):
    model_config = STRICT_RECORD

    start: Timestamp
    end: Timestamp
    events: Annotated[int, Field(ge=0), INTEGRAL]


class ModelUpdate(BaseModel):
    model_config = STRICT_RECORD

    schema_version: SchemaVersion1 = 1
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
