"""Event-time sliding windows over fixed buckets.

A window of `span` buckets of `bucket_s` seconds, read at time t, is the sum of the buckets b with
floor(t / bucket_s) - span < b <= floor(t / bucket_s): the current bucket plus the span - 1
before it. The writer keeps, per entity and bucket family, only buckets within `kept` of the
newest bucket it has seen (`mx_<family>`), so the stored state does not depend on the order in
which partitions were interleaved (see apply.lua).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from streams.features.definitions import HOUR_BUCKETS, MINUTE_BUCKETS


@dataclass(frozen=True)
class BucketFamily:
    field_prefix: str
    bucket_s: int
    kept: int

    def bucket(self, ts: float) -> int:
        return math.floor(ts / self.bucket_s)

    def field(self, bucket: int) -> str:
        return f"{self.field_prefix}{bucket}"


MINUTES = BucketFamily("m", 60, MINUTE_BUCKETS)
HOURS = BucketFamily("h", 3600, HOUR_BUCKETS)


@dataclass(frozen=True)
class Window:
    name: str
    family: BucketFamily
    span: int

    def count(self, fields: Mapping[str, str], as_of: float) -> int:
        """Events in this window at `as_of` from an entity's hash fields (missing = 0)."""
        newest = self.family.bucket(as_of)
        total = 0
        for bucket in range(newest - self.span + 1, newest + 1):
            value = fields.get(self.family.field(bucket))
            if value is not None:
                total += int(value)
        return total


WINDOW_1H = Window("1h", MINUTES, 60)
WINDOW_24H = Window("24h", HOURS, 24)
WINDOW_7D = Window("7d", HOURS, 168)
WINDOWS: tuple[Window, ...] = (WINDOW_1H, WINDOW_24H, WINDOW_7D)
