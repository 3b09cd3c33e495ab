"""Training data for the ranker, logged and labelled (`rec.features` -> `ranker.examples`).

Log and wait: the scorer publishes, per answered request, the candidates it ranked and the exact
feature vectors it computed for them (`ServedFeatures`, on `rec.features`), with the model
version and the feature-set version. The monitor waits for the attribution window to close and
publishes the same vectors with a graded label per logged candidate (`RankerExample`, on
`ranker.examples`): features as of serving time, labels from the future, so the ranker trains on
exactly what it will see when it serves.

Vectors travel as one base64 string of little-endian float32s, row-major `[candidates,
n_features]`: exact (the float32 the scorer computed, bit for bit) and about a third the size of
JSON numbers. What JSON Schema cannot say (the vectors decode to one finite row of
`n_features` per candidate, one grade per candidate) is checked by `matrix()` / `graded()`,
which every reader calls before it uses a record and dead-letters the record when they refuse.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, Field

from schemas.fields import (
    INTEGRAL,
    STRICT_RECORD,
    Id,
    SchemaVersion1,
    Timestamp,
    full_match,
)
from schemas.limits import MAX_K

MAX_FEATURES = 64
"""Most columns a feature set may have."""
MAX_LOGGED_CANDIDATES = MAX_K
_MAX_VECTOR_CHARS = 4 * ((MAX_LOGGED_CANDIDATES * MAX_FEATURES * 4 + 2) // 3)

Vectors = Annotated[
    str,
    *full_match("[A-Za-z0-9+/]*={0,2}", "A-Za-z0-9+/="),
    Field(max_length=_MAX_VECTOR_CHARS),
]
"""Base64 of little-endian float32, row-major `[candidates, n_features]`."""

Grade = Annotated[int, Field(ge=0, le=3), INTEGRAL]
"""0 not acted on, 1 click, 2 add-to-cart, 3 purchase (the strongest act counts)."""

FloatMatrix = npt.NDArray[np.float32]


def encode_vectors(matrix: FloatMatrix) -> str:
    """The wire form of `[candidates, n_features]` float32 vectors."""
    return base64.b64encode(np.ascontiguousarray(matrix, dtype="<f4").tobytes()).decode()


def decode_vectors(text: str, n_features: int) -> FloatMatrix:
    """`[candidates, n_features]` float32 from the wire form; ValueError when it is not one."""
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError("vectors are not base64") from exc
    if n_features < 1 or len(raw) % (4 * n_features):
        raise ValueError("vectors are not whole rows of n_features float32s")
    matrix = np.frombuffer(raw, dtype="<f4").astype(np.float32).reshape(-1, n_features)
    if not np.isfinite(matrix).all():
        raise ValueError("vectors hold NaN or infinity")
    return matrix


class _LoggedVectors(BaseModel):
    """Fields and checks `ServedFeatures` and `RankerExample` share."""

    model_config = STRICT_RECORD

    schema_version: SchemaVersion1 = 1
    request_id: Id
    user_id: Id
    served_at: Timestamp
    features_at: Timestamp
    """The point in time the features describe (what an offline recomputation uses)."""
    model_version: Id
    """The retrieval model's version (its ANN scores and vectors are features)."""
    ranker_version: Id | None = None
    """The ranker that ordered the answer; None when retrieval order was served."""
    feature_set: Id
    n_features: Annotated[int, Field(ge=1, le=MAX_FEATURES), INTEGRAL]
    candidates: Annotated[list[Id], Field(min_length=1, max_length=MAX_LOGGED_CANDIDATES)]
    """Item ids in retrieval order; row i of `vectors` is candidate i."""
    vectors: Vectors

    def matrix(self) -> FloatMatrix:
        """`[len(candidates), n_features]`; ValueError when the vectors are not that."""
        matrix = decode_vectors(self.vectors, self.n_features)
        if matrix.shape[0] != len(self.candidates):
            raise ValueError("vectors must hold one row per candidate")
        return matrix


class ServedFeatures(_LoggedVectors):
    """What one answer's ranking stage saw (`rec.features`, keyed by user_id)."""

    strategy: Literal["ranker", "retrieval_order"]
    shown: Annotated[list[Id], Field(max_length=MAX_K)]
    """The items the answer showed, best first (each one of `candidates` or a backfill)."""


class RankerExample(_LoggedVectors):
    """A labelled answer (`ranker.examples`, keyed by user_id): grades of its logged candidates,
    known once the attribution window closed."""

    grades: Annotated[list[Grade], Field(min_length=1, max_length=MAX_LOGGED_CANDIDATES)]
    """One grade per candidate, shown or not: the ranker chooses which candidates are shown,
    so its gate judges it on all of them."""
    labelled_at: Timestamp

    def graded(self) -> tuple[FloatMatrix, list[int]]:
        """Vectors and grades, row for row; ValueError when they do not pair up."""
        matrix = self.matrix()
        if len(self.grades) != len(self.candidates):
            raise ValueError("grades must hold one grade per candidate")
        return matrix, list(self.grades)
