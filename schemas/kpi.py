"""KPI windows on `kpi.metrics`, keyed by model version and experiment arm."""

from __future__ import annotations

import hashlib
from typing import Annotated, Self

from pydantic import BaseModel, Field, model_validator

from schemas.fields import INTEGRAL, STRICT_RECORD, Count, Id, Rate, SchemaVersion4, Timestamp
from schemas.limits import MAX_K, USER_BUCKETS

USER_BUCKET_SALT = "kpi-user-bucket"
"""What the user bucket hashes with the user id: fixed, and unlike any experiment's salt, so
buckets do not follow arm assignment."""

BucketCounts = Annotated[list[Count], Field(min_length=USER_BUCKETS, max_length=USER_BUCKETS)]


def empty_buckets() -> list[int]:
    """Zero counts for every user bucket."""
    return [0] * USER_BUCKETS


def user_bucket(user_id: str) -> int:
    """The stable bucket (0 .. USER_BUCKETS - 1) whose counts a user's responses add to."""
    digest = hashlib.blake2b(f"{USER_BUCKET_SALT}:{user_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % USER_BUCKETS


class KpiReport(BaseModel):
    model_config = STRICT_RECORD

    schema_version: SchemaVersion4 = 4
    report_id: Id
    """The same for every publication of one window's counts (a monitor that restarts after
    publishing and before committing publishes them again): consumers count each id once."""
    model_version: Id
    experiment: Id | None = None
    """The experiment the counted responses name (None: responses outside any experiment)."""
    arm: Id | None = None
    """The experiment arm that answered the counted responses: one report per version and arm,
    so each arm's KPI is read on its own randomly assigned users."""
    window_start: Timestamp
    window_end: Timestamp
    k: Annotated[int, Field(ge=1, le=MAX_K), INTEGRAL]
    responses: Count
    hits: Count
    clicks: Count
    conversions: Count
    hit_rate_at_k: Rate
    ctr: Rate
    conversion_rate: Rate
    bucket_responses: BucketCounts
    """`responses` split by the answered user's bucket (`user_bucket`): USER_BUCKETS counts
    summing to `responses`."""
    bucket_hits: BucketCounts
    """`hits` split the same way, summing to `hits`; each at most its bucket's responses."""

    @model_validator(mode="after")
    def _buckets_add_up(self) -> Self:
        if sum(self.bucket_responses) != self.responses:
            raise ValueError("bucket_responses must sum to responses")
        if sum(self.bucket_hits) != self.hits:
            raise ValueError("bucket_hits must sum to hits")
        if any(h > n for h, n in zip(self.bucket_hits, self.bucket_responses, strict=True)):
            raise ValueError("a bucket's hits cannot exceed its responses")
        return self
