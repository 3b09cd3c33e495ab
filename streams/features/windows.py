"""Event-time sliding windows over fixed buckets.

A window of `span` buckets of `bucket_s` seconds, read at time t, is the sum of the buckets b with
floor(t / bucket_s) - span < b <= floor(t / bucket_s): the current bucket plus the span - 1
before it. The writer keeps, per entity and bucket family, only buckets within `kept` of the
newest bucket it has seen (`mx_<family>`), so the stored state does not depend on the order in
which partitions were interleaved (see apply.lua). Each family of an entity is its own hash,
`<entity key>:<family>`, mapping the bucket number (as decimal text) to its event count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from streams.features.definitions import HOUR_BUCKETS, MINUTE_BUCKETS


@dataclass(frozen=True)
class BucketFamily:
    name: str
    """Suffix of the family's hash key and of the entity's `mx_<name>` (newest bucket) field."""
    bucket_s: int
    kept: int

    def bucket(self, ts: float) -> int:
        return math.floor(ts / self.bucket_s)


MINUTES = BucketFamily("m", 60, MINUTE_BUCKETS)
HOURS = BucketFamily("h", 3600, HOUR_BUCKETS)


@dataclass(frozen=True)
class Window:
    name: str
    family: BucketFamily
    span: int

    def first_bucket(self, as_of: float) -> int:
        """Oldest bucket the window covers at `as_of` (the newest is the bucket of `as_of`)."""
        return self.family.bucket(as_of) - self.span + 1

    def start_s(self, as_of: float) -> int:
        """First second the window covers at `as_of`: what an offline count over raw event
        times (models.point_in_time) uses, so it agrees with the bucketed count."""
        return self.first_bucket(as_of) * self.family.bucket_s

    def count(self, buckets: Mapping[str, str], as_of: float) -> int:
        """Events in this window at `as_of`, from the family's hash (bucket text -> count)."""
        newest = self.family.bucket(as_of)
        oldest = self.first_bucket(as_of)
        return sum(int(n) for b, n in buckets.items() if oldest <= int(b) <= newest)


WINDOW_1H = Window("1h", MINUTES, 60)
WINDOW_24H = Window("24h", HOURS, 24)
WINDOW_7D = Window("7d", HOURS, 168)
WINDOWS: tuple[Window, ...] = (WINDOW_1H, WINDOW_24H, WINDOW_7D)
